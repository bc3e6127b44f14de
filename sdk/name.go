package sdk

// ValidName reports whether s can be a plugin's name (the <name> of
// agentenv-<kind>-<name>): lower-case letters, digits, '-', '_' and '.',
// starting with a letter or digit.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case i > 0 && (r == '-' || r == '_' || r == '.'):
		default:
			return false
		}
	}
	return true
}
