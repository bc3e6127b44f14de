// Package serve is the life of an agentenv server: open a bundle's
// runtime, build its envs, serve it over HTTP, and on a stop signal drain
// (sessions told, every episode torn down) and close the plugins. The
// `agentenv serve` command reads flags into Options and calls Run; a
// program embedding agentenv can do the same.
package serve

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
	"github.com/agentenv/agentenv/core/ui"
)

// Defaults of Options' timeouts.
const (
	// DefaultOpenTimeout bounds opening the runtime: starting the plugins
	// and reaping what a killed earlier server left.
	DefaultOpenTimeout = 2 * time.Minute
	// DefaultShutdownTimeout bounds the drain after the first stop signal.
	DefaultShutdownTimeout = 60 * time.Second
)

// ErrAbandoned is returned when a second stop signal came during the
// drain: the plugins were closed at once and the teardown left unfinished
// (a restart of the same server reaps what is left). The caller should
// exit now: the drain goes on in the background until then.
var ErrAbandoned = errors.New("second signal: teardown abandoned")

// Options say what to serve and how. Runtime and Server are passed to
// runtime.Open and server.New as they are, but for the fields Run sets
// itself: Runtime.ServerID, Logger, Transcripts and Observer (when nil:
// the server's metrics; the transcripts' recorder joins it), and
// Server.Player, Catalog, Info, Readiness, PluginRestarts, Logger and
// Metrics (when nil: new ones).
type Options struct {
	// Listener is where to serve; Addr is the address it was opened for,
	// as the user wrote it, which names the server (runtime.ServerID).
	Listener net.Listener
	Addr     string
	// Version is agentenv's version, reported in /info.
	Version string
	Runtime runtime.Options
	Server  server.Options
	Logger  hclog.Logger // nil = no logging
	// OpenTimeout and ShutdownTimeout (0: the defaults) bound opening the
	// runtime and the drain.
	OpenTimeout, ShutdownTimeout time.Duration
	// Transcripts say where ended episodes' records go (transcripts.go).
	Transcripts Transcripts
	// NoUI serves no live page (/ui) and keeps no ring of recent episodes
	// for it.
	NoUI bool
}

// Run serves the bundle in dir until a signal on stop: the first stops
// new episodes, drains the live ones and returns nil once everything is
// torn down; a second during the drain returns ErrAbandoned at once. A
// signal while the envs are still being built stops there. Run closes the
// listener; on every return but ErrAbandoned nothing it started is left
// running.
func Run(dir string, o Options, stop <-chan os.Signal) error {
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	openTimeout, shutdownTimeout := o.OpenTimeout, o.ShutdownTimeout
	if openTimeout <= 0 {
		openTimeout = DefaultOpenTimeout
	}
	if shutdownTimeout <= 0 {
		shutdownTimeout = DefaultShutdownTimeout
	}
	ln := o.Listener
	defer ln.Close()
	serverID, err := runtime.ServerID(dir, o.Addr)
	if err != nil {
		return err
	}
	if id := runtime.PodServerID(os.Getenv); id != "" {
		serverID = id
	}
	metrics := o.Server.Metrics
	if metrics == nil {
		metrics = server.NewMetrics()
	}
	records := o.Transcripts
	if records.Recent == nil && !o.NoUI {
		// The live page (/ui) lists the last episodes ended: keep them.
		records.Recent = transcript.NewRecent(0, 0)
	}
	bundleName, err := bundle.NameOf(dir) // the runtime loads the bundle later
	if err != nil {
		return err
	}
	recorder, closeTranscripts, err := records.open(metrics, bundleName, serverID, log)
	if err != nil {
		return err
	}
	// Deferred: it runs after the engine closed, so the episodes the drain
	// ends are recorded too.
	defer closeTranscripts()
	ro := o.runtimeOptions(serverID, log, metrics, recorder)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	rt, err := runtime.Open(ctx, dir, ro)
	if err != nil {
		return err
	}
	b := rt.Bundle
	info, err := server.BundleInfo(b, o.Version)
	if err != nil {
		return errors.Join(err, rt.Close(context.Background()))
	}
	// The server listens while the envs build (minutes on a cold machine):
	// /health says "preparing" and everything else PREPARING until then.
	ready := server.NewReadiness(rt.Engine.EnvNames())
	metrics.Prime(sandboxLabel(ro.Sandbox), rt.Engine.EnvNames())
	so := o.serverOptions(rt, info, metrics, ready, log)
	srv, err := server.New(so)
	if err != nil {
		return errors.Join(err, rt.Close(context.Background()))
	}
	// The live page (/ui), behind the same token.
	livePage := "off (--ui=false)"
	if !o.NoUI {
		page := ui.New(ui.Options{Title: b.Name, Live: srv.Live, Recent: records.Recent, Open: so.Token == "",
			ErrorDetail: so.ErrorDetail, Logger: log.Named("ui")})
		srv.HandlePage(ui.Prefix, page.Server())
		livePage = "http://" + ln.Addr().String() + ui.Prefix + "/"
	}
	if so.Token == "" && !isLoopback(ln.Addr()) {
		log.Warn("serving on a non-loopback address without a token: anyone who can reach it can run episodes; set --token-var", "addr", ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopNow := func(cause error) error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(cause, srv.Shutdown(ctx), rt.Close(ctx))
	}
	log.Info("listening; preparing the envs before serving episodes (/health answers 503 \"preparing\" until then)",
		"url", "http://"+ln.Addr().String(), "envs", len(b.Envs))
	// Build the envs now, so the first resets do not wait on a compiler.
	prepCtx, prepCancel := context.WithCancel(context.Background())
	defer prepCancel()
	prepared := make(chan error, 1)
	go func() { prepared <- rt.Prepare(prepCtx, ready) }()
	select {
	case err := <-prepared:
		var pe *runtime.PrepareError
		switch {
		case err == nil:
		case b.Harbor && errors.As(err, &pe) && len(pe.Failed) < pe.Envs && prepCtx.Err() == nil:
			// A dataset of many tasks serves the tasks that built: the
			// others' episodes fail to deploy, naming the build's error.
			log.Error("some tasks' envs did not build; their episodes fail with DEPLOY_FAILED",
				"failed", len(pe.Failed), "of", pe.Envs, "envs", strings.Join(pe.Failed, ","), "error", err)
		default:
			return stopNow(err)
		}
		ready.Ready()
	case err := <-served:
		prepCancel()
		<-prepared
		return stopNow(err)
	case sig := <-stop:
		prepCancel()
		<-prepared
		log.Info("stopped before serving", "signal", sig.String())
		return stopNow(nil)
	}
	log.Info("serving", "bundle", b.Name, "tasks", len(b.Tasks), "url", "http://"+ln.Addr().String(),
		"sandbox", ro.Sandbox, "max_concurrent_envs", so.MaxConcurrentEnvs, "warm", ro.Warm, "token", so.Token != "", "server_id", serverID,
		"live_page", livePage)
	return drain(srv, rt, served, stop, shutdownTimeout, log)
}

// drain serves until a stop signal, then drains: sessions told and their
// episodes torn down, then the runtime closed. A second signal during the
// drain abandons it (ErrAbandoned); a listener that fails first is torn
// down the same way.
func drain(srv *server.Server, rt *runtime.Runtime, served <-chan error, stop <-chan os.Signal, shutdownTimeout time.Duration, log hclog.Logger) error {
	select {
	case err := <-served:
		// The listener failed under us: still tear down what is live.
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(err, srv.Shutdown(ctx), rt.Close(ctx))
	case sig := <-stop:
		log.Info("draining: no new episodes; tearing down live ones", "signal", sig.String())
	}
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		// Sessions first (each tears its episode down), then whatever the
		// runtime still holds (envs deployed to list a toolset's tools,
		// teardowns in the background), then the plugins.
		err := srv.Shutdown(ctx)
		drained <- errors.Join(err, rt.Close(ctx))
	}()
	select {
	case err := <-drained:
		<-served
		if err != nil {
			return err
		}
		log.Info("stopped")
		return nil
	case sig := <-stop:
		log.Warn("second signal: exiting now, without finishing the teardown; a restart reaps what is left", "signal", sig.String())
		if rt.Host != nil {
			rt.Host.Close()
		}
		return ErrAbandoned
	}
}

// runtimeOptions are o.Runtime with what Run sets: the server's id, the
// logger, and the engine's observer (o.Runtime's, else the metrics) with
// the transcripts' recorder beside it, the engine then keeping turns.
func (o Options) runtimeOptions(serverID string, log hclog.Logger, metrics *server.Metrics, recorder episode.Observer) runtime.Options {
	ro := o.Runtime
	ro.ServerID, ro.Logger = serverID, log
	if ro.Observer == nil {
		ro.Observer = metrics
	}
	if recorder != nil {
		ro.Transcripts = true
		ro.Observer = episode.Observers{ro.Observer, recorder}
	}
	return ro
}

// serverOptions are o.Server with what Run sets: the runtime's engine as
// the player, its bundle's catalogue and info, the metrics, readiness and
// logger.
func (o Options) serverOptions(rt *runtime.Runtime, info server.Info, metrics *server.Metrics, ready *server.Readiness, log hclog.Logger) server.Options {
	so := o.Server
	so.Player, so.Catalog, so.Info, so.Logger = rt.Engine, server.NewBundleCatalog(rt.Bundle), info, log.Named("server")
	so.Metrics, so.Readiness = metrics, ready
	so.PluginRestarts = func() float64 { return float64(rt.Restarts()) }
	return so
}

// sandboxLabel is the sandbox's name as metrics label it.
func sandboxLabel(name string) string {
	if name == "" {
		return runtime.DefaultSandbox
	}
	return name
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
