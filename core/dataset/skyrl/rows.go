package skyrl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/agentenv/agentenv/core/tempfile"
)

// EnvClass is the env_class of every row: the skyrl-gym env registered
// by agent_env.training.skyrl.
const EnvClass = "agentenv"

// Row is one row of a split's parquet file, as SkyRL's PromptDataset
// reads it: prompt and env_class are its own columns, every other column
// reaches the env as an extra. Structs and lists only: Hugging Face
// datasets cannot read MAP columns.
type Row struct {
	Prompt     []Message `parquet:"prompt,list"`
	EnvClass   string    `parquet:"env_class"`
	Episode    Episode   `parquet:"episode"`
	Server     Server    `parquet:"server"`
	DataSource string    `parquet:"data_source"`
}

// Episode is what the env plays: the task by split and index (and its
// id, to check), and the tools the row's prompt offers.
type Episode struct {
	Split  string   `parquet:"split"`
	Index  int64    `parquet:"index"`
	TaskID string   `parquet:"task_id"`
	Tools  []string `parquet:"tools,list"`
}

// Server is where and how the env plays it. TokenVar names the
// environment variable holding the server's token (null: none); the
// token itself is never written.
type Server struct {
	URL          string  `parquet:"url"`
	TokenVar     *string `parquet:"token_var,optional"`
	Attempts     int64   `parquet:"attempts"`
	ResetTimeout int64   `parquet:"reset_timeout"` // seconds
	ToolFormat   string  `parquet:"tool_format"`
}

// rowsKind tags SkyRL's dataset files (agentenv.rows in the metadata).
const rowsKind = "skyrl/1"

// rowGroupRows bounds a row group, so readers (and this writer) hold
// at most this many rows of a column in memory.
const rowGroupRows = 1024

// writeParquet writes rows to a temp file in dir, for name, tagged
// agentenv.rows=kind in the file's metadata. It returns the temp file's
// path for the caller to rename (so several files land together), or
// removes it on error. Temp files for name that a killed run left are
// removed first.
func writeParquet[T any](dir, name string, rows []T, kind string) (tmp string, err error) {
	f, err := tempfile.Create(dir, name) // and remove those a killed run left
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := parquet.NewGenericWriter[T](f,
		parquet.Compression(&zstd.Codec{}),
		// Version 1 data pages: every reader reads them.
		parquet.DataPageVersion(1),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
		parquet.KeyValueMetadata("agentenv.rows", kind),
	)
	for start := 0; start < len(rows); start += rowGroupRows {
		if _, err := w.Write(rows[start:min(len(rows), start+rowGroupRows)]); err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	// CreateTemp made it 0600; the rows are no secret.
	if err := f.Chmod(0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return f.Name(), nil
}

// WriteParquet writes rows (structs with parquet tags) to path as the
// rows are written: zstd, version 1 data pages, row groups of at most
// 1,024 rows, tagged agentenv.rows=kind. The file appears complete or
// not at all: it is written to a temp file beside path and renamed.
func WriteParquet[T any](path string, rows []T, kind string) error {
	tmp, err := writeParquet(filepath.Dir(path), filepath.Base(path), rows, kind)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadRows reads a split's parquet file back.
func ReadRows(path string) ([]Row, error) {
	rows, err := parquet.ReadFile[Row](path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	return rows, nil
}
