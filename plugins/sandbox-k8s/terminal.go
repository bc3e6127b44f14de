package k8s

import (
	"errors"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// A terminal env (sandbox.Spec.Terminal: a Harbor task) runs its task's
// image unchanged with agentenv's terminal server as its command. The
// binary comes from terminal_image: an init container copies it into an
// emptyDir that the env container mounts read-only, so the task's image
// needs no change and no shell (the init container runs the binary's own
// install subcommand, as a FROM-scratch image has no cp).
const (
	// terminalImageBinary is where terminal_image holds the binary.
	terminalImageBinary = "/agentenv-terminal"
	// terminalVolume is the emptyDir the binary is copied into.
	terminalVolume = "agentenv-terminal"
	// terminalDir is where that emptyDir is mounted, in both containers.
	terminalDir = "/.agentenv"
	// terminalPath is the binary in the env container.
	terminalPath = terminalDir + "/agentenv-terminal"
	// terminalInit is the init container's name.
	terminalInit = "agentenv-terminal-install"
	// terminalVolumeMB bounds the emptyDir (the binary is ~15 MiB).
	terminalVolumeMB = 64
	// envWorkdir tells the terminal where the model's commands run.
	envWorkdir = "AGENTENV_WORKDIR"
)

// errNoTerminalImage is why a terminal env cannot run without terminal_image.
var errNoTerminalImage = errors.New("it runs agentenv's terminal server (a Harbor task), which the k8s sandbox copies into the pod from an image, " +
	"and terminal_image is not set: build bin/agentenv-terminal (`make build`, static with CGO_ENABLED=0), " +
	"put it in an image at /agentenv-terminal (a Dockerfile of two lines: `FROM scratch` and `COPY agentenv-terminal /agentenv-terminal`), " +
	"push it where the nodes pull from, and set terminal_image to it (docs/kubernetes.md, \"Harbor tasks\")")

// terminalWorkdir is where a terminal env's commands run: the spec's
// workdir, or "" for the image's WORKDIR (the runtime's default).
func terminalWorkdir(spec sandbox.Spec) (string, error) {
	wd := spec.Terminal.Workdir
	if wd == "" {
		return "", nil
	}
	if !path.IsAbs(wd) {
		return "", fmt.Errorf("workdir %q is not an absolute path in the container", wd)
	}
	return path.Clean(wd), nil
}

// withTerminal makes pod's env container run agentenv's terminal from
// terminal_image instead of its image's entrypoint, in workdir ("" = the
// image's). The init container gets the env's resources, so the pod asks
// for no more than the env alone.
func withTerminal(cfg Config, pod *corev1.Pod, workdir string) {
	no, yes := false, true
	env := &pod.Spec.Containers[0]
	size := resourceMB(terminalVolumeMB)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: terminalVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}})
	pod.Spec.InitContainers = []corev1.Container{{
		Name:                     terminalInit,
		Image:                    cfg.TerminalImage,
		ImagePullPolicy:          env.ImagePullPolicy,
		Command:                  []string{terminalImageBinary, "install", terminalPath},
		Resources:                env.Resources,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: terminalVolume, MountPath: terminalDir}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Privileged:               &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}}
	env.Command = []string{terminalPath}
	env.Args = nil
	env.VolumeMounts = append(env.VolumeMounts, corev1.VolumeMount{Name: terminalVolume, MountPath: terminalDir, ReadOnly: true})
	if workdir != "" {
		env.WorkingDir = workdir
		env.Env = append(env.Env, corev1.EnvVar{Name: envWorkdir, Value: workdir})
	}
}

// security is how an env's container runs. agentenv's own envs are locked
// down (non-root, read-only root, no capabilities). A terminal env is a
// task's own image, built and checked under Docker's defaults: it runs as
// its image's user (root, mostly) with a writable root and the runtime's
// default capabilities, as `docker run` would (its commands install
// packages, chown, write anywhere), less NET_RAW when it must have no
// internet. Explicit settings win either way.
type security struct {
	nonRoot  bool
	runAs    *int64
	readOnly bool
	drop     []corev1.Capability
}

func securityOf(cfg Config, spec sandbox.Spec) security {
	es := cfg.envSettings(spec.Env)
	terminal := spec.Terminal != nil
	s := security{nonRoot: !terminal, runAs: cfg.RunAsUser, readOnly: !terminal, drop: []corev1.Capability{"ALL"}}
	if terminal {
		s.drop = nil
		if spec.NoInternet {
			s.drop = []corev1.Capability{"NET_RAW"}
		}
	}
	if cfg.RunAsNonRoot != nil {
		s.nonRoot = *cfg.RunAsNonRoot
	}
	if es.RunAsNonRoot != nil {
		s.nonRoot = *es.RunAsNonRoot
	}
	if es.RunAsUser != nil {
		s.runAs = es.RunAsUser
	}
	if es.WritableRoot != nil {
		s.readOnly = !*es.WritableRoot
	}
	return s
}

// egressCIDRs are where an env may connect. An env that asks for no
// internet gets only what its own envs.<env>.egress_cidrs name; a terminal
// env that may use it also gets internet_cidrs (Harbor's allow_internet is
// true unless a task says otherwise); every other env gets egress_cidrs.
func egressCIDRs(cfg Config, spec sandbox.Spec) []string {
	own := cfg.envSettings(spec.Env).EgressCIDRs
	if spec.NoInternet {
		return append([]string{}, own...)
	}
	out := append(append([]string{}, cfg.EgressCIDRs...), own...)
	if spec.Terminal != nil {
		out = append(out, cfg.InternetCIDRs...)
	}
	return out
}
