// Package ui is the server's live web page, /ui: the sessions and the
// capacity queue, the last episodes ended (each one's conversation a
// click away), reward and score histograms per split, failure causes over
// time and phase-time percentiles. It reads what /metrics reads (the
// server's Live) and the transcripts' in-memory ring (transcript.Recent).
//
// Everything is rendered on the server by html/template, which escapes
// all an env or a model wrote; a small script, embedded like the styles,
// swaps in the live part every few seconds. Nothing is fetched from
// anywhere else, and the Content-Security-Policy forbids it. The token
// check and the login cookie are the server's (server.HandlePage).
package ui

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

// Prefix is where serve mounts the page.
const Prefix = "/ui"

// DefaultRefresh is how often the page updates its live part.
const DefaultRefresh = 2 * time.Second

//go:embed assets
var assets embed.FS

var (
	pageCSS = mustRead("assets/ui.css")
	pageJS  = mustRead("assets/ui.js")
	tmpl    = template.Must(template.New("").Funcs(template.FuncMap{
		"secs": seconds,
		// path escapes an id as one path segment ("/", "?" and "#" too).
		"path": url.PathEscape,
		"num":  func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) },
		"reward": func(r *float64) string {
			if r == nil {
				return "—"
			}
			return strconv.FormatFloat(*r, 'f', 3, 64)
		},
		"pct": func(a, b int) float64 {
			if b == 0 {
				return 0
			}
			return 100 * float64(a) / float64(b)
		},
	}).ParseFS(assets, "assets/*.html"))
)

func mustRead(name string) string {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Options say what the page shows.
type Options struct {
	// Title names the page (the bundle's name).
	Title string
	// Live reads the server's state (server.Server.Live).
	Live func() server.Live
	// Recent holds the last episodes ended; nil shows none.
	Recent *transcript.Recent
	// Window caps the episodes the summaries cover (0: all Recent keeps).
	Window int
	// Refresh is how often the page updates (0: DefaultRefresh).
	Refresh time.Duration
	// Open says no token is configured: the page shows no log-out button.
	Open bool
	// ErrorDetail shows the full detail of DEPLOY_FAILED errors, as
	// server.Options.ErrorDetail sends it to clients; by default the page
	// shows what a client is told, and the detail stays in the log.
	ErrorDetail bool
	Logger      hclog.Logger
}

// Page is the /ui page.
type Page struct {
	opts Options
	log  hclog.Logger
	mux  *http.ServeMux
}

// New builds the page; hand Server() to server.HandlePage at Prefix.
func New(o Options) *Page {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Live == nil {
		o.Live = func() server.Live { return server.Live{} }
	}
	p := &Page{opts: o, log: o.Logger, mux: http.NewServeMux()}
	p.mux.HandleFunc("GET "+Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
	})
	p.mux.HandleFunc("GET "+Prefix+"/{$}", p.handleIndex)
	p.mux.HandleFunc("GET "+Prefix+"/live", p.handleLive)
	p.mux.HandleFunc("GET "+Prefix+"/data.json", p.handleData)
	p.mux.HandleFunc("GET "+Prefix+"/episodes/{id}", p.handleEpisode)
	p.mux.HandleFunc("GET "+Prefix+"/episodes/{id}/record.json", p.handleRecord)
	p.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		p.render(w, http.StatusNotFound, "notfound", p.frame("Not found", nil))
	})
	return p
}

// Server is the page as server.HandlePage takes it.
func (p *Page) Server() server.Page {
	return server.Page{Handler: p.mux, Login: p.login}
}

// frame is what every template gets.
type frame struct {
	Title, Bundle, Base string
	Nonce               string
	CSS                 template.CSS
	JS                  template.JS
	Open                bool
	RefreshMS           int64
	LoginProblem        string
	Data                any
}

func (p *Page) frame(title string, data any) *frame {
	return &frame{
		Title: title, Bundle: p.opts.Title, Base: Prefix, Nonce: nonce(),
		CSS: template.CSS(pageCSS), JS: template.JS(pageJS), Open: p.opts.Open,
		RefreshMS: p.opts.Refresh.Milliseconds(), Data: data,
	}
}

func nonce() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// render writes template name, with the headers that keep the page to
// itself: its own nonce'd style and script and nothing from elsewhere.
func (p *Page) render(w http.ResponseWriter, status int, name string, f *frame) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, name, f); err != nil {
		p.log.Error("render page", "template", name, "error", err)
		http.Error(w, "the page failed to render; the server's log says why", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; connect-src 'self'; img-src 'self' data:; form-action 'self'; "+
		"frame-ancestors 'none'; base-uri 'none'; style-src 'nonce-"+f.Nonce+"'; script-src 'nonce-"+f.Nonce+"'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the browser may be gone
}

func (p *Page) login(w http.ResponseWriter, _ *http.Request, status int, problem string) {
	f := p.frame("Log in", nil)
	// Nothing of the server before the token: not even the bundle's name.
	f.LoginProblem, f.Bundle, f.Open = problem, "", true
	p.render(w, status, "login", f)
}

// snapshot reads the live state and the window's records now.
func (p *Page) snapshot() Snapshot {
	var recs []*transcript.Record
	var ended uint64
	if p.opts.Recent != nil {
		recs = p.opts.Recent.List()
		ended = p.opts.Recent.Total()
	}
	if p.opts.Window > 0 && len(recs) > p.opts.Window {
		recs = recs[:p.opts.Window]
	}
	live := p.opts.Live()
	if !p.opts.ErrorDetail {
		for i, ls := range live.Sessions {
			if ls.Episode != nil && isDeployFailure(ls.Episode.Error) {
				ep := *ls.Episode
				ep.Error = deployFailedBrief
				live.Sessions[i].Episode = &ep
			}
		}
	}
	return buildSnapshot(time.Now(), live, recs, ended)
}

// deployFailedBrief stands for a DEPLOY_FAILED error's detail (server
// paths, an env's command line and output, which may print its secrets)
// on a page any holder of the token may read.
const deployFailedBrief = "DEPLOY_FAILED: the episode's envs could not be set up; the server's log has the detail (serve --error-detail shows it here)"

func isDeployFailure(msg string) bool { return strings.HasPrefix(msg, "DEPLOY_FAILED:") }

func (p *Page) handleIndex(w http.ResponseWriter, _ *http.Request) {
	title := "agentenv"
	if p.opts.Title != "" {
		title = p.opts.Title + " · agentenv"
	}
	p.render(w, http.StatusOK, "index", p.frame(title, p.snapshot()))
}

// handleLive is the live part alone, which the script swaps in.
func (p *Page) handleLive(w http.ResponseWriter, _ *http.Request) {
	p.render(w, http.StatusOK, "live", p.frame("", p.snapshot()))
}

func (p *Page) handleData(w http.ResponseWriter, _ *http.Request) {
	b, err := json.Marshal(p.snapshot())
	if err != nil {
		p.log.Error("encode page data", "error", err)
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n')) //nolint:errcheck
}

// episodeView is one episode's page.
type episodeView struct {
	Rec  *transcript.Record
	Row  EpisodeRow
	Text string // the conversation as `agentenv transcripts` prints it, long texts cut
	Cut  bool   // Text is not all of it
}

// episode is the kept record of the request's episode, as this page may
// show it, or ok false once a not-found page is written.
func (p *Page) episode(w http.ResponseWriter, r *http.Request) (*transcript.Record, bool) {
	id := r.PathValue("id")
	var rec *transcript.Record
	ok := false
	if p.opts.Recent != nil {
		rec, ok = p.opts.Recent.Get(id)
	}
	if !ok {
		p.render(w, http.StatusNotFound, "notfound", p.frame("Episode not found",
			"no episode "+strings.TrimSpace(id)+" among the last kept in memory; `agentenv transcripts` reads older ones from serve --record's files"))
		return nil, false
	}
	if !p.opts.ErrorDetail && isDeployFailure(rec.Error) {
		brief := *rec // records are shared: change a copy
		brief.Error = deployFailedBrief
		rec = &brief
	}
	return rec, true
}

func (p *Page) handleEpisode(w http.ResponseWriter, r *http.Request) {
	rec, ok := p.episode(w, r)
	if !ok {
		return
	}
	v := episodeView{Rec: rec, Row: episodeRow(time.Now(), rec)}
	v.Text, v.Cut = conversation(rec)
	p.render(w, http.StatusOK, "episode", p.frame("Episode "+rec.EpisodeID, v))
}

// handleRecord downloads an episode's whole record: its line as
// `serve --record` writes it, streamed a turn at a time.
func (p *Page) handleRecord(w http.ResponseWriter, r *http.Request) {
	rec, ok := p.episode(w, r)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", `attachment; filename="`+fileSafe(rec.EpisodeID)+`.json"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if err := transcript.WriteJSON(w, rec); err != nil {
		p.log.Debug("episode record download ended early", "episode_id", rec.EpisodeID, "error", err)
	}
}

// fileSafe is an episode id as a download's file name: letters, digits,
// '-', '_' and '.', the rest '_'.
func fileSafe(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z') {
			b[i] = '_'
		}
	}
	return "episode-" + string(b)
}
