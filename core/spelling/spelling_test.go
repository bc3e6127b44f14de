package spelling

import "testing"

func TestNearest(t *testing.T) {
	opts := []string{"gridsim", "inbox", "sandbox-bwrap"}
	for name, want := range map[string]string{
		"gridsm": "gridsim", "GridSim": "gridsim", "inbx": "inbox", "grid": "", "zzz": "", "": "",
	} {
		if got := Nearest(name, opts); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance = %d, want 3", d)
	}
}
