// Package regularfile reads files that must be plain files of bounded
// size: a bundle's files, a tokenizer folder's. A device (/dev/zero) would
// be read until memory runs out and a FIFO would block the reader forever,
// so both are refused, as is a file over the caller's size bound.
package regularfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is a path that is (or leads through symlinks to) something
// other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// TooBigError is a file over the size bound.
type TooBigError struct{ Size, Max int64 }

func (e *TooBigError) Error() string {
	return fmt.Sprintf("%d bytes, over the limit of %d bytes", e.Size, e.Max)
}

// Read reads path, following symlinks, when it is a regular file of at
// most max bytes. A missing file's error wraps fs.ErrNotExist.
func Read(path string, max int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, &TooBigError{fi.Size(), max}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooBigError{int64(len(data)), max}
	}
	return data, nil
}

// Open opens path for reading, following symlinks, when it is a regular
// file, and returns its FileInfo; a reader that streams the file bounds
// what it reads itself. A missing file's error wraps fs.ErrNotExist.
func Open(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := Check(fi); err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: should the file have become a FIFO since the Stat, the
	// open returns at once and the Stat of the open file refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := Check(fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Check refuses anything but a regular file, naming what it is; the error
// wraps ErrNotRegular.
func Check(fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	what := "a special file"
	switch {
	case m.IsDir():
		what = "a folder"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	}
	return fmt.Errorf("%w but %s", ErrNotRegular, what)
}
