package hostenv

// LabelsMatch reports whether have holds every label in want with the same
// value; an empty want matches everything (List's filter).
func LabelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// CopyLabels is a copy of in; never nil, so a handle always has a map.
func CopyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
