// Times Hugging Face's tokenizers on the corpus BenchmarkEncode writes, so
// the Go benchmark can report its speed against them in the same run.
//   node bench.mjs ORACLE_DIR corpus.json  ->  {"tokens": N, "rust_s": s, "js_s": s}
// rust_s, js_s: seconds for one pass over the corpus (best of 3, after a
// warm-up pass that fills the caches, as the Go benchmark's are).
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [dir, corpusFile] = process.argv.slice(2);
const require = createRequire(path.join(dir, "package.json"));
const rust = require("tokenizers");
const { Tokenizer: JSTokenizer } = require("@huggingface/tokenizers");
const mdir = path.join(dir, "models", "qwen3");
const corpus = JSON.parse(fs.readFileSync(corpusFile, "utf8"));

const rt = rust.Tokenizer.fromFile(path.join(mdir, "tokenizer.json"));
const jt = new JSTokenizer(
  JSON.parse(fs.readFileSync(path.join(mdir, "tokenizer.json"), "utf8")),
  JSON.parse(fs.readFileSync(path.join(mdir, "tokenizer_config.json"), "utf8")),
);

async function time(pass) {
  await pass(); // warm-up
  let best = Infinity, tokens = 0;
  for (let i = 0; i < 3; i++) {
    const t0 = process.hrtime.bigint();
    tokens = await pass();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return [best, tokens];
}

const [rustS, rustTokens] = await time(async () => {
  let n = 0;
  for (const s of corpus) n += (await rt.encode(s, null, { addSpecialTokens: false })).getIds().length;
  return n;
});
const [jsS, jsTokens] = await time(async () => {
  let n = 0;
  for (const s of corpus) n += jt.encode(s, { add_special_tokens: false }).ids.length;
  return n;
});
if (rustTokens !== jsTokens) throw new Error(`Rust counts ${rustTokens} tokens, JS ${jsTokens}`);
console.log(JSON.stringify({ tokens: rustTokens, rust_s: rustS, js_s: jsS }));
