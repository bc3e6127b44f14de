// Command coredns is CoreDNS with only the plugins the test cluster's
// Corefile uses: the full plugin set links ~60 plugins and their cloud
// SDKs, which the cluster never needs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the order the plugins run in, as in CoreDNS's plugin.cfg.
var directives = []string{"bind", "ready", "errors", "cache", "kubernetes", "loop"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
