// Reads a Hugging Face hub cache with scanCacheDir from npm @huggingface/hub
// (HF's own cache scanner) and prints what it found, for hub_test.go:
//   node scancache.mjs ORACLE_DIR CACHE_DIR
import { createRequire } from "node:module";
import path from "node:path";

const [dir, cache] = process.argv.slice(2);
const require = createRequire(path.join(dir, "package.json"));
const { scanCacheDir } = require("@huggingface/hub");
const info = await scanCacheDir(cache);
console.log(JSON.stringify({
  warnings: info.warnings.map(String),
  repos: info.repos.map((r) => ({
    name: r.id.name,
    type: r.id.type,
    files: r.filesCount,
    revisions: r.revisions.map((v) => ({
      commit: v.commitOid,
      refs: v.refs,
      files: v.files.map((f) => ({ path: path.relative(v.path, f.path), blob: path.relative(r.path, f.blob.path), size: f.blob.size })),
    })),
  })),
}));
