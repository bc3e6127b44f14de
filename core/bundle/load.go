package bundle

import "errors"

// Load reads and validates the bundle in dir. On any problem it returns a
// *LoadError listing them and no bundle.
func Load(dir string, opts Options) (*Bundle, error) {
	return nil, errors.New("bundle.Load: not implemented yet")
}
