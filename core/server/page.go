package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PageCookieLifetime is how long a page's login lasts before the form asks
// for the token again.
const PageCookieLifetime = 12 * time.Hour

// maxLoginBytes bounds a login form's body.
const maxLoginBytes = 4 << 10

// Page is a web page for people served beside the API (the /ui
// dashboard). A browser cannot send the bearer token, so the server asks
// for it once: a request without the token or the page's cookie gets
// Login's form (401), whose POST to <prefix>/login sets the cookie. The
// server makes every check; the page only renders.
type Page struct {
	// Handler serves the page's paths to authorized requests: the token
	// in the Authorization header, the page's cookie, or no token
	// configured.
	Handler http.Handler
	// Login writes the login form with status (its headers too); problem,
	// when not empty, is a sentence saying why the last login failed (a
	// wrong token, too many of them). It must not show what was sent.
	Login func(w http.ResponseWriter, r *http.Request, status int, problem string)
}

// The login form's problems.
const (
	LoginWrongToken = "That is not the server's token. Try again."
	loginCrossSite  = "The form was sent from another site; log in from this server's own page."
)

// HandlePage serves p at prefix (such as "/ui") and under prefix/, beside
// the API; call it before Serve. Pages are served while the envs still
// build, so a page can show that.
//
//   - POST prefix/login takes the form field "token": right, it sets the
//     cookie (Path=prefix, HttpOnly, SameSite=Strict, PageCookieLifetime;
//     Secure over TLS, a TLS proxy's X-Forwarded-Proto included) and redirects to prefix/; wrong, the form again
//     with 401. Wrong tokens are throttled per client address (429 and
//     Retry-After while it waits; see loginThrottle).
//   - POST prefix/logout clears the cookie.
//
// Both POSTs are refused (403) when a browser sends them from another
// site (Sec-Fetch-Site, or an Origin that is not the Host), so another
// site cannot log a user out, or into its own session.
//
// The cookie holds no token: an expiry and its MAC under a key derived
// from the token's digest, so it stops working when the token changes.
func (s *Server) HandlePage(prefix string, p Page) {
	prefix = "/" + strings.Trim(prefix, "/")
	throttle := newLoginThrottle(s.log, prefix)
	s.mu.Lock()
	s.pages = append(s.pages, prefix)
	if s.logins == nil {
		s.logins = map[string]*loginThrottle{}
	}
	s.logins[prefix] = throttle
	s.mu.Unlock()
	pc := pageCookie{name: "agentenv_page" + strings.ReplaceAll(prefix, "/", "_"), path: prefix, key: s.token.derive("agentenv page cookie " + prefix)}
	login := func(w http.ResponseWriter, r *http.Request, status int, problem string) {
		w.Header().Set("Cache-Control", "no-store")
		p.Login(w, r, status, problem)
	}
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		login(w, r, http.StatusForbidden, loginCrossSite)
	}))
	s.mux.Handle("POST "+prefix+"/login", csrf.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := clientKey(r.RemoteAddr)
		if s.token.on {
			if d := throttle.wait(key); d > 0 {
				secs := int((d + time.Second - 1) / time.Second)
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				login(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many wrong tokens from your address: try again in %d s.", secs))
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
		if err := r.ParseForm(); err != nil {
			login(w, r, http.StatusBadRequest, LoginWrongToken)
			return
		}
		if s.token.on && !s.token.matches(r.PostForm.Get("token")) {
			s.metrics.failures.WithLabelValues(CodeUnauthorized).Inc()
			throttle.failed(key)
			login(w, r, http.StatusUnauthorized, LoginWrongToken)
			return
		}
		if s.token.on {
			throttle.succeeded(key)
			http.SetCookie(w, pc.issue(time.Now(), overTLS(r)))
		}
		http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
	})))
	s.mux.Handle("POST "+prefix+"/logout", csrf.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: pc.name, Value: "", Path: pc.path, MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
		http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
	})))
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.token.on || s.token.allowed(r) || pc.valid(r, time.Now()) {
			p.Handler.ServeHTTP(w, r)
			return
		}
		login(w, r, http.StatusUnauthorized, "")
	})
	s.mux.Handle(prefix, guarded)
	s.mux.Handle(prefix+"/", guarded)
	if prefix == "/"+s.opts.Info.Name {
		// A bundle named as the page keeps its ORS task API there.
		for _, op := range orsOps {
			s.mux.Handle(op.method+" "+prefix+"/"+op.name, s.requireToken(s.ors))
		}
	}
}

// overTLS reports whether the browser reached us over TLS: directly, or
// through a proxy that says so. A client lying about it only makes its own
// cookie Secure, which its browser then keeps off plain HTTP.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// isPage reports whether path is one of a page's.
func (s *Server) isPage(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pages {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// derive is a key for purpose, derived from the token's digest (nil
// without a token).
func (t tokenCheck) derive(purpose string) []byte {
	if !t.on {
		return nil
	}
	m := hmac.New(sha256.New, t.digest[:])
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// pageCookie is a page's login cookie: "<expiry unix seconds>.<MAC>".
type pageCookie struct {
	name, path string
	key        []byte
}

func (c pageCookie) mac(exp string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(exp))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (c pageCookie) issue(now time.Time, secure bool) *http.Cookie {
	exp := strconv.FormatInt(now.Add(PageCookieLifetime).Unix(), 10)
	return &http.Cookie{
		Name: c.name, Value: exp + "." + c.mac(exp), Path: c.path,
		MaxAge: int(PageCookieLifetime / time.Second), HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure,
	}
}

func (c pageCookie) valid(r *http.Request, now time.Time) bool {
	if c.key == nil {
		return false
	}
	ck, err := r.Cookie(c.name)
	if err != nil {
		return false
	}
	exp, mac, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= unix {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(c.mac(exp)))
}
