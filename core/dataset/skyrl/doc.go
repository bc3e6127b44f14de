// Package skyrl writes a served bundle's tasks as SkyRL training data:
// one parquet file per split, a row per task, each row's prompt the
// task's opening messages with its toolset's tools rendered by the
// model's chat template as vLLM's generator renders them, and the
// episode (split, index, tools) and server to play it on as the row's
// extras (docs/training-skyrl.md).
//
// Write reads the catalogue of a running `agentenv serve` (Catalog; the
// HTTPCatalog reads it through the Go client), renders and counts every
// prompt (ChatTemplate, a Counter from core/tokenizer), refuses prompts
// over the length limit before anything is written, and writes each file
// whole or not at all. `agentenv skyrl rows` and eval's prompts use it.
package skyrl
