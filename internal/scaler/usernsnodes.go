package scaler

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Whether the cluster's nodes can run the UserNamespaced flavour's pods:
// a node whose runtime cannot (containerd before 2, runc before 1.2) fails
// each such pod as it starts, a runner Job that never starts, again for
// every job. The kubelet reports its runtime's support in the node's
// status (runtimeHandlers[].features.userNamespaces, from Kubernetes
// 1.30), which the scaler reads before it creates such pods, at most
// every nodesRecheck, and only when a group has that flavour.

// nodesRecheck is how long what the nodes said is trusted: a node pool
// upgraded to a runtime that supports user namespaces is seen within it.
const nodesRecheck = 10 * time.Minute

// nodesPageSize bounds each page of the nodes list: the first node that
// supports user namespaces ends the reading.
const nodesPageSize = 100

// nodesVerdict is what the nodes say of user namespaces.
type nodesVerdict int

const (
	// nodesUnknown: the nodes could not be read (the platform did not
	// grant it), or none reports its runtime's features (before 1.30):
	// the scaler does not refuse on a guess.
	nodesUnknown nodesVerdict = iota
	// nodesSupport: a node's runtime runs pods in user namespaces.
	nodesSupport
	// nodesLack: the nodes report their runtimes' features, and none does.
	nodesLack
)

// nodeSupport is the last verdict and when it was read.
type nodeSupport struct {
	mu      sync.Mutex
	at      time.Time
	verdict nodesVerdict
	warned  bool
}

// nodesRunUserNamespaces is the nodes' verdict, read again once it is
// older than nodesRecheck.
func (s *Scaler) nodesRunUserNamespaces(ctx context.Context) nodesVerdict {
	n := &s.nodes
	n.mu.Lock()
	defer n.mu.Unlock()
	now := s.now()
	if !n.at.IsZero() && now.Sub(n.at) < nodesRecheck {
		return n.verdict
	}
	v, err := s.readNodes(ctx)
	if err != nil && !n.warned {
		n.warned = true
		s.log.Warn("cannot read the nodes, so cannot tell whether they run user-namespaced runner pods; a node that cannot leaves such pods unstarted (the chart grants the scaler list on nodes with userNamespacedRunners)", "error", err)
	}
	n.at, n.verdict = now, v
	return v
}

func (s *Scaler) readNodes(ctx context.Context) (nodesVerdict, error) {
	reported := false
	opts := metav1.ListOptions{Limit: nodesPageSize}
	for {
		list, err := s.kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nodesUnknown, err
		}
		for _, node := range list.Items {
			for _, h := range node.Status.RuntimeHandlers {
				if h.Features == nil || h.Features.UserNamespaces == nil {
					continue
				}
				reported = true
				if *h.Features.UserNamespaces {
					return nodesSupport, nil
				}
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if reported {
		return nodesLack, nil
	}
	return nodesUnknown, nil
}
