package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentenv/agentenv/core/eval"
)

// progressBar draws eval's progress on stderr: a bar redrawn in place on
// a terminal, a line every tenth of the way otherwise (a log file, CI).
// Log lines written through it go above the bar.
type progressBar struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu       sync.Mutex
	last     eval.Progress
	drawn    bool // a bar is on the terminal's last line
	drawnAt  time.Time
	reported int // the tenth last reported, off a terminal
}

func newProgressBar(w io.Writer) *progressBar {
	b := &progressBar{w: w, start: time.Now(), reported: -1}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

// update takes the eval's progress (eval.Options.Progress).
func (b *progressBar) update(p eval.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = p
	if b.tty {
		if p.Done == p.Total || time.Since(b.drawnAt) >= 100*time.Millisecond {
			b.draw()
		}
		return
	}
	tenth := 10
	if p.Total > 0 {
		tenth = p.Done * 10 / p.Total
	}
	if tenth > b.reported {
		b.reported = tenth
		fmt.Fprintln(b.w, b.line(p))
	}
}

func (b *progressBar) line(p eval.Progress) string {
	return fmt.Sprintf("%d/%d rollouts, mean reward %.3f, %d failed, %s",
		p.Done, p.Total, p.MeanReward, p.Failed, time.Since(b.start).Round(time.Second))
}

func (b *progressBar) draw() {
	const width = 30
	p := b.last
	filled := width
	if p.Total > 0 {
		filled = p.Done * width / p.Total
	}
	fmt.Fprintf(b.w, "\r\x1b[K[%s%s] %s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), b.line(p))
	b.drawn, b.drawnAt = true, time.Now()
}

// Write prints a log line above the bar.
func (b *progressBar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
	}
	n, err := b.w.Write(p)
	if b.drawn {
		b.draw()
	}
	return n, err
}

// finish leaves the bar's last state on its own line.
func (b *progressBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.drawn {
		b.draw()
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}
