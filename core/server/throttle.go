package server

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Login throttling: a page login answers a wrong token at once, so
// without a bound one connection tried 1,500 tokens a second. Each client
// address gets loginFreeFailures wrong tokens free; each one after makes
// it wait, 1 s doubling up to loginMaxWait, during which its logins are
// refused unchecked (the right token too: otherwise the wait would not
// slow a guesser down). A right token forgets the address's failures.
const (
	loginFreeFailures = 5
	loginBaseWait     = time.Second
	loginMaxWait      = time.Minute
	// loginForget drops an address's count this long after its last
	// failure.
	loginForget = time.Hour
	// loginMaxAddrs bounds the addresses tracked; past it, new ones share
	// one count (a flood from many addresses is throttled as one).
	loginMaxAddrs = 10000
	// loginLogWindow: wrong logins are logged in aggregate, at most one
	// line per window (each was a log line before).
	loginLogWindow = time.Minute
)

type loginFailures struct {
	n     int
	until time.Time // no login is checked before
	last  time.Time
}

type loginThrottle struct {
	log                  hclog.Logger
	page                 string
	free                 int
	base, max, logWindow time.Duration
	mu                   sync.Mutex
	addrs                map[string]*loginFailures
	wrong, refused       int // since the last log line
	window               map[string]struct{}
	logTimer             *time.Timer
	now                  func() time.Time
}

func newLoginThrottle(log hclog.Logger, page string) *loginThrottle {
	return &loginThrottle{log: log, page: page, free: loginFreeFailures, base: loginBaseWait, max: loginMaxWait,
		logWindow: loginLogWindow, addrs: map[string]*loginFailures{}, window: map[string]struct{}{}, now: time.Now}
}

// clientKey is what failures are counted under: the client's IP address,
// an IPv6 one by its /64 (one host holds a whole /64).
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// wait is how long the client at key must wait before its next login is
// checked (0: check it now). A refused login is counted for the log.
func (t *loginThrottle) wait(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.addrs[t.slot(key)]
	if f == nil {
		return 0
	}
	d := f.until.Sub(t.now())
	if d <= 0 {
		return 0
	}
	t.refused++
	t.window[key] = struct{}{}
	t.logLater()
	return d
}

// slot is the map key key counts under: its own, or the shared one past
// loginMaxAddrs addresses.
func (t *loginThrottle) slot(key string) string {
	if _, ok := t.addrs[key]; ok || len(t.addrs) < loginMaxAddrs {
		return key
	}
	return "*"
}

// failed counts a wrong token from key; the first of a log window is
// logged at once, the rest at the window's end in one line.
func (t *loginThrottle) failed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.addrs) >= loginMaxAddrs {
		t.forget(now)
	}
	s := t.slot(key)
	f := t.addrs[s]
	if f == nil {
		f = &loginFailures{}
		t.addrs[s] = f
	}
	f.n++
	f.last = now
	if over := f.n - t.free; over > 0 {
		d := t.max
		if over <= 30 && t.base<<(over-1) < t.max {
			d = t.base << (over - 1)
		}
		f.until = now.Add(d)
	}
	if t.logTimer == nil {
		t.log.Info("page login refused: wrong token (further ones are logged once a minute, together)", "page", t.page, "remote", key)
		t.logTimer = time.AfterFunc(t.logWindow, t.flush)
		return
	}
	t.wrong++
	t.window[key] = struct{}{}
}

// succeeded forgets key's failures.
func (t *loginThrottle) succeeded(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.addrs, key)
}

// forget drops the counts of addresses quiet for loginForget.
func (t *loginThrottle) forget(now time.Time) {
	for k, f := range t.addrs {
		if now.Sub(f.last) > loginForget && now.After(f.until) {
			delete(t.addrs, k)
		}
	}
}

// logLater makes sure a log line will sum up the window.
func (t *loginThrottle) logLater() {
	if t.logTimer == nil {
		t.logTimer = time.AfterFunc(t.logWindow, t.flush)
	}
}

// flush logs the window's wrong and refused logins, if any, in one line.
func (t *loginThrottle) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logTimer = nil
	if t.wrong == 0 && t.refused == 0 {
		return
	}
	t.log.Warn("page logins refused", "page", t.page, "window", t.logWindow, "wrong_tokens", t.wrong,
		"refused_while_throttled", t.refused, "addresses", len(t.window))
	t.wrong, t.refused = 0, 0
	clear(t.window)
	// A new window opens only when the next failure comes.
	t.logTimer = time.AfterFunc(t.logWindow, t.flush)
}
