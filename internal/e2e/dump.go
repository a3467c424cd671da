//go:build e2e

// Dumps: what a failure message shows of the namespaces under test, and the
// pod logs the bed's agent writes.

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// DumpNamespaces describes what a failure needs to be understood: the
// RunnerGroups, Jobs, pods, recent events and the listener logs' tails.
// Callers pass it through redact (waitUntil does).
func (b *Testbed) DumpNamespaces(namespaces ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sb strings.Builder
	for _, ns := range namespaces {
		fmt.Fprintf(&sb, "---- namespace %s\n", ns)
		if list, err := b.Groups(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, item := range list.Items {
				rg := &v1alpha1.RunnerGroup{}
				if runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, rg) == nil {
					fmt.Fprintf(&sb, "RunnerGroup %s labels=%v max=%d\n  %s\n", rg.Name, rg.Spec.Labels, rg.Spec.MaxActiveRunners, StatusLine(rg))
				}
			}
		}
		if list, err := b.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, j := range list.Items {
				fmt.Fprintf(&sb, "Job %s gitea-job=%s %s created=%s active=%d succeeded=%d failed=%d\n", j.Name, j.Labels[LabelGiteaJob], JobState(&j),
					j.CreationTimestamp.UTC().Format(time.RFC3339), j.Status.Active, j.Status.Succeeded, j.Status.Failed)
			}
		}
		if list, err := b.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range list.Items {
				var states []string
				for _, cs := range p.Status.ContainerStatuses {
					st := "waiting"
					switch {
					case cs.State.Running != nil:
						st = "running"
					case cs.State.Terminated != nil:
						st = fmt.Sprintf("exit %d", cs.State.Terminated.ExitCode)
					case cs.State.Waiting != nil:
						st = cs.State.Waiting.Reason
					}
					states = append(states, fmt.Sprintf("%s=%s(restarts %d)", cs.Name, st, cs.RestartCount))
				}
				fmt.Fprintf(&sb, "Pod %s %s node=%s %s\n", p.Name, p.Status.Phase, p.Spec.NodeName, strings.Join(states, " "))
			}
		}
		if list, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			evs := list.Items
			sort.Slice(evs, func(i, j int) bool { return evs[i].LastTimestamp.Before(&evs[j].LastTimestamp) })
			if len(evs) > 30 {
				evs = evs[len(evs)-30:]
			}
			for _, e := range evs {
				fmt.Fprintf(&sb, "Event %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		files, _ := filepath.Glob(filepath.Join(b.Dir, "logs", "pods", ns+"_*_listener.log"))
		for _, f := range files {
			raw, _ := os.ReadFile(f)
			fmt.Fprintf(&sb, "== %s (tail)\n%s\n", filepath.Base(f), Tail(string(raw), 25))
		}
	}
	return sb.String()
}

// PodLog is what the agent wrote for one container of a pod.
func (b *Testbed) PodLog(ns, pod, container string) string {
	raw, _ := os.ReadFile(filepath.Join(b.Dir, "logs", "pods", fmt.Sprintf("%s_%s_%s.log", ns, pod, container)))
	return string(raw)
}

func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Lines returns the lines of s that contain every one of subs.
func Lines(s string, subs ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		l := sc.Text()
		ok := true
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
