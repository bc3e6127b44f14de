package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// tokenCheck holds only the token's digest, so the token itself is never
// kept by the server past New and comparisons take the same time whatever
// the length of the guess.
type tokenCheck struct {
	digest [32]byte
	on     bool
}

func newTokenCheck(token string) tokenCheck {
	if token == "" {
		return tokenCheck{}
	}
	return tokenCheck{digest: sha256.Sum256([]byte(token)), on: true}
}

// allowed reports whether r carries the token: "Authorization: Bearer
// <token>", or Basic auth whose password is the token (what OpenEnv's
// stock Python client sends for a URL like http://user:<token>@host).
func (t tokenCheck) allowed(r *http.Request) bool {
	if !t.on {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok {
		return false
	}
	cred = strings.TrimSpace(cred)
	switch strings.ToLower(scheme) {
	case "bearer":
		return t.matches(cred)
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return false
		}
		_, pass, ok := strings.Cut(string(raw), ":")
		return ok && t.matches(pass)
	}
	return false
}

func (t tokenCheck) matches(guess string) bool {
	d := sha256.Sum256([]byte(guess))
	return subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1
}

// requireToken wraps h with the token check. A refusal never echoes what
// was sent.
func (s *Server) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.token.allowed(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentenv"`)
			s.metrics.failures.WithLabelValues(CodeUnauthorized).Inc()
			writeHTTPError(w, http.StatusUnauthorized, CodeUnauthorized,
				"missing or wrong token: send Authorization: Bearer <token>")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// crossSiteBrowser reports whether r comes from a web page of another
// site, and its Origin. The /ws upgrade is a GET a page may send anywhere,
// and a browser adds the Basic credentials it holds for the server (an
// http://user:<token>@host URL once opened), so without this check
// another site could drive episodes with them. Browsers always send an
// Origin on a WebSocket upgrade, and Sec-Fetch-Site where they know it;
// trainers' clients send neither, or an Origin of the host they dial. An
// Origin matching the Host, or a proxy's X-Forwarded-Host (which a page
// cannot set), is the server's own site.
func crossSiteBrowser(r *http.Request) (origin string, cross bool) {
	origin = r.Header.Get("Origin")
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return origin, false
	case "":
	default: // same-site, cross-site
		return origin, true
	}
	if origin == "" {
		return "", false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return origin, true // "null": a sandboxed frame, a file
	}
	if strings.EqualFold(u.Host, r.Host) {
		return origin, false
	}
	for _, h := range r.Header.Values("X-Forwarded-Host") {
		for _, one := range strings.Split(h, ",") {
			if strings.EqualFold(u.Host, strings.TrimSpace(one)) {
				return origin, false
			}
		}
	}
	return origin, true
}
