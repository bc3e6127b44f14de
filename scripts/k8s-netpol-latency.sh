#!/bin/bash
# How long the test cluster's NetworkPolicy controller (kube-router) takes to
# apply a new policy: one probe pod per node, then N times a default-deny
# policy created with kubectl, timed until each node's iptables holds
# kube-router's "run through nw policy <name>" rule (polled every 10 ms in
# the node's network namespace). Needs root and a cluster up
# (docs/k8s-test-cluster.md); the probe image is the harness tests' (run
# `go test ./internal/k8scluster/ -run TestClusterNetworkPolicy` once first).
# Usage: AGENTENV_K8S_STATE=/tmp/agentenv-k8s N=7 scripts/k8s-netpol-latency.sh
set -euo pipefail
state=${AGENTENV_K8S_STATE:-/tmp/agentenv-k8s}
export KUBECONFIG=$state/admin.kubeconfig
ns=netpol-latency-$$
nodes=($(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'))
kubectl create ns "$ns" >/dev/null
trap 'kubectl delete ns "$ns" --wait=false >/dev/null' EXIT
for i in "${!nodes[@]}"; do
  kubectl -n "$ns" apply -f - >/dev/null <<Y
apiVersion: v1
kind: Pod
metadata: {name: p$i}
spec:
  nodeName: ${nodes[$i]}
  terminationGracePeriodSeconds: 0
  automountServiceAccountToken: false
  containers: [{name: probe, image: agentenv.local/k8scluster-probe:v1, imagePullPolicy: Never, args: [serve]}]
Y
done
kubectl -n "$ns" wait --for=condition=Ready pod --all --timeout=120s >/dev/null
ms() { echo $(( ($2 - $1) / 1000000 )); }
for i in $(seq 1 "${N:-7}"); do
  name=deny-$i
  t0=$(date +%s%N)
  kubectl -n "$ns" apply -f - >/dev/null <<Y
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: $name}
spec: {podSelector: {}, policyTypes: [Ingress]}
Y
  t1=$(date +%s%N)
  for j in "${!nodes[@]}"; do
    until nsenter --net="$state/node$((j + 1))/netns" iptables-save -t filter 2>/dev/null | grep -q "run through nw policy $name\""; do sleep 0.01; done
  done
  t2=$(date +%s%N)
  echo "policy $name: kubectl apply $(ms "$t0" "$t1") ms; applied -> rules in every node $(ms "$t1" "$t2") ms"
  kubectl -n "$ns" delete networkpolicy "$name" >/dev/null
done
