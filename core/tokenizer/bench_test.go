package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
)

// benchCorpus is prompts as agentenv renders them for Qwen3: a system turn
// with a task's instructions and its tools as JSON schemas, a user turn with
// numbers (prices, sizes), the generation prompt; some in other languages
// and with code. About 1 MB, the same on every run.
func benchCorpus() []string {
	r := rand.New(rand.NewPCG(13, 2026))
	tools := []string{
		`{"type": "function", "function": {"name": "submit_schedule", "description": "Commit the day's schedule: one action per hour.", "parameters": {"type": "object", "properties": {"actions": {"type": "array", "items": {"type": "integer", "enum": [-1, 0, 1]}, "description": "24 integers, one per hour from hour 0 to hour 23: 1 = charge for the hour, -1 = sell for the hour, 0 = idle"}}, "required": ["actions"]}}}`,
		`{"type": "function", "function": {"name": "read_prices", "description": "Read the day-ahead prices in EUR/MWh.", "parameters": {"type": "object", "properties": {"date": {"type": "string", "description": "YYYY-MM-DD"}}, "required": ["date"]}}}`,
		`{"type": "function", "function": {"name": "move", "description": "Move the agent one cell north, south, east or west.", "parameters": {"type": "object", "properties": {"direction": {"type": "string", "enum": ["north", "south", "east", "west"]}}, "required": ["direction"]}}}`,
		`{"type": "function", "function": {"name": "run_python", "description": "Run a Python snippet and return stdout.", "parameters": {"type": "object", "properties": {"code": {"type": "string"}, "timeout_s": {"type": "number"}}, "required": ["code"]}}}`,
	}
	prose := []string{
		"You operate a grid-scale battery for one day in a day-ahead electricity market. You know the day's 24 hourly prices in advance and commit to a schedule: one action for each hour.",
		"Each action lasts the whole hour, at the battery's full power. The battery's charge can never go below empty or above its capacity; energy left at the end of the day is worth nothing.",
		"Prices can be negative: charging at a negative price earns money, selling at one costs money. Profit = money from sales - money paid for purchases.",
		"你是一个帮助用户解决问题的智能助手。请仔细阅读任务说明，然后调用合适的工具。",
		"Résumé : l'agent doit trouver la clé dans la grille 5×5, puis ouvrir la porte — sans dépasser 40 pas.",
		"```python\nimport numpy as np\nprices = np.array(prices)\nbest = np.argsort(prices)[:4]\nprint(best.tolist())\n```",
	}
	var corpus []string
	for i := 0; i < 240; i++ {
		var b strings.Builder
		b.WriteString("<|im_start|>system\n")
		for k := 0; k < 2+r.IntN(3); k++ {
			b.WriteString(prose[r.IntN(len(prose))] + "\n")
		}
		b.WriteString("\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
		for _, k := range r.Perm(len(tools))[:1+r.IntN(len(tools))] {
			b.WriteString("\n" + tools[k])
		}
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
		fmt.Fprintf(&b, "<|im_start|>user\nDate %d-%02d-%02d. Power %d MW, capacity %d MWh, efficiency %d%%, start %d MWh.\nPrices (EUR/MWh):",
			2024+r.IntN(2), 1+r.IntN(12), 1+r.IntN(28), 5+r.IntN(50), 10+r.IntN(200), 80+r.IntN(15), r.IntN(10))
		for h := 0; h < 24; h++ {
			fmt.Fprintf(&b, " %.2f", r.Float64()*220-20)
		}
		b.WriteString("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
		corpus = append(corpus, b.String())
	}
	return corpus
}

// benchSetup loads the Qwen3 tokenizer and the corpus, whose size in bytes
// it sets for the MB/s figure.
func benchSetup(b *testing.B) (*Tokenizer, []string) {
	tok, err := Load(tokenizertest.Qwen3Dir(b))
	if err != nil {
		b.Fatal(err)
	}
	corpus := benchCorpus()
	bytes := 0
	for _, s := range corpus {
		bytes += len(s)
	}
	b.SetBytes(int64(bytes))
	return tok, corpus
}

// BenchmarkEncode counts the tokens of benchCorpus (warm word cache) and
// reports the speed against Hugging Face's tokenizers on the same corpus in
// the same run: x-rust and x-js are their time per pass over ours (above 1:
// this package is faster).
func BenchmarkEncode(b *testing.B) {
	tok, corpus := benchSetup(b)
	file := filepath.Join(b.TempDir(), "corpus.json")
	data, _ := json.Marshal(corpus)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		b.Fatal(err)
	}
	var ref struct {
		Tokens int     `json:"tokens"`
		RustS  float64 `json:"rust_s"`
		JSS    float64 `json:"js_s"`
	}
	out := tokenizertest.Node(b, filepath.Join("testdata", "bench.mjs"), tokenizertest.Oracle(b), file)
	if err := json.Unmarshal(out, &ref); err != nil {
		b.Fatalf("bench.mjs: %v: %s", err, out)
	}
	count := func() int {
		n := 0
		for _, s := range corpus {
			n += countOf(b, tok, s)
		}
		return n
	}
	if n := count(); n != ref.Tokens { // also warms the cache, as bench.mjs does
		b.Fatalf("Go counts %d tokens, Hugging Face %d", n, ref.Tokens)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		count()
	}
	b.StopTimer()
	pass := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(ref.Tokens)/pass/1e6, "Mtokens/s")
	b.ReportMetric(ref.RustS/pass, "x-rust")
	b.ReportMetric(ref.JSS/pass, "x-js")
}

// BenchmarkEncodeCold is BenchmarkEncode with an empty word cache on every
// pass: the cost when every word is new.
func BenchmarkEncodeCold(b *testing.B) {
	tok, corpus := benchSetup(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tok.model.cache = newWordCache()
		b.StartTimer()
		for _, s := range corpus {
			countOf(b, tok, s)
		}
	}
}

// BenchmarkLoad reads the Qwen3 tokenizer.json (11 MB, 151k tokens); the
// floor is encoding/json decoding the same file into a map, the least a
// loader must do.
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(tokenizertest.Qwen3Dir(b), TokenizerFile))
	if err != nil {
		b.Fatal(err)
	}
	var floor float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		start := b.Elapsed()
		b.StartTimer()
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		floor += (b.Elapsed() - start).Seconds()
		b.StartTimer()
		if _, err := FromJSON(data); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	total := b.Elapsed().Seconds()
	b.ReportMetric((total-floor)/float64(b.N), "s/load")
	b.ReportMetric(floor/float64(b.N), "s/floor")
	b.ReportMetric((total-floor)/floor, "x-floor")
}
