package local

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// storageOpt is the container's disk cap for spec (storage_mb), or nil
// when it asks for none or the engine showed it cannot cap one.
func (e *engine) storageOpt(spec sandbox.Spec) map[string]string {
	if spec.StorageMB <= 0 {
		return nil
	}
	e.mu.Lock()
	refused := e.noStorageOpt != nil
	e.mu.Unlock()
	if refused {
		return nil
	}
	return map[string]string{"size": fmt.Sprintf("%dM", spec.StorageMB)}
}

// storageRefused reports whether a container creation failed because the
// engine's storage driver cannot cap a container's disk: vfs or overlay2
// on a file system without project quotas ("Filesystem does not support,
// or has not enabled quotas"; "--storage-opt is supported only for overlay
// over xfs with 'pquota' mount option"), or a driver with no size option.
func storageRefused(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "quota") || strings.Contains(msg, "storage-opt") || strings.Contains(msg, "storage opt")
}

// storageUnsupported records that the engine cannot cap a container's
// disk, and says so once: storage_mb is not enforced on this engine.
func (e *engine) storageUnsupported(ctx context.Context, cli *client.Client, spec sandbox.Spec, why error) {
	e.mu.Lock()
	first := e.noStorageOpt == nil
	if first {
		e.noStorageOpt = why
	}
	e.mu.Unlock()
	if !first {
		return
	}
	driver := "?"
	if info, err := cli.Info(ctx, client.InfoOptions{}); err == nil {
		driver = info.Info.Driver
	}
	e.log.Warn("storage_mb is not enforced: this Docker engine's storage driver cannot cap a container's disk (overlay2 needs xfs mounted with pquota, vfs a backing file system with project quotas); containers run without a disk cap",
		"driver", driver, "env", spec.Env, "storage_mb", spec.StorageMB, "engine_said", why.Error())
}
