package tokenizer

import (
	"errors"
	"fmt"

	"github.com/agentenv/agentenv/core/regularfile"
)

// Size bounds of a model's files, each well over the largest on the Hub
// (tokenizer.json files run to about 35 MB, chat templates to 100 KB).
const (
	MaxTokenizerBytes = 256 << 20
	MaxConfigBytes    = 64 << 20
	MaxTemplateBytes  = 4 << 20
)

// maxBytes is the bound of one of the files this package reads.
func maxBytes(name string) int64 {
	switch name {
	case TokenizerFile:
		return MaxTokenizerBytes
	case ConfigFile:
		return MaxConfigBytes
	}
	return MaxTemplateBytes
}

// readModelFile reads one of a model's files: a regular file (directly or
// through symlinks), as a FIFO would block the reader forever and a device
// (/dev/zero) would be read until memory runs out, of at most max bytes.
// A missing file's error wraps fs.ErrNotExist.
func readModelFile(path string, max int64) ([]byte, error) {
	data, err := regularfile.Read(path, max)
	var big *regularfile.TooBigError
	switch {
	case errors.Is(err, regularfile.ErrNotRegular):
		return nil, fmt.Errorf("%s: %w; a tokenizer folder holds plain files (a symlink must lead to one)", path, err)
	case errors.As(err, &big):
		return nil, fmt.Errorf("%s: %w for this file; is it the model's?", path, err)
	case err != nil:
		return nil, err
	}
	return data, nil
}
