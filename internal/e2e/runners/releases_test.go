//go:build e2e

// Each runner release the README supports, serving a job through its own
// image: the default image's release, and the older one a group pins.

package runners

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestEachRunnerReleaseServesAJobFromItsImage: a group without a template
// gets the default image and its release (3.1.0); a group whose template
// pins gitea/runner:1.0.8-dind-rootless gets 1.0.8. The bed plays a runner
// image with the release its tag names, so the runner's own log says which
// one declared itself to Gitea and ran the job.
func TestEachRunnerReleaseServesAJobFromItsImage(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	tests := []struct {
		name, image, release string
	}{
		{name: "default", image: "", release: "3.1.0"},
		{name: "pinned", image: "gitea/runner:1.0.8-dind-rootless", release: "1.0.8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := e2e.TestContext(t, 4*time.Minute)
			opts := e2e.SceneOpts{Name: "release-" + tc.name, Max: 1}
			if tc.image != "" {
				opts.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: runnerjob.ContainerName, Image: tc.image},
				}}}
			}
			s := b.ServedGroup(ctx, t, opts)
			key := e2e.JobKey("release")
			e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", nil, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
			jobs := b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1)
			got := b.ExpectCompleted(ctx, t, s.NS, s.Group, s.Fx.Repo, e2e.IDsOf(jobs, key), s.Dump)

			pods, err := b.Kube.CoreV1().Pods(s.NS).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + got[key].Claim.Name})
			require.NoError(t, err)
			require.Len(t, pods.Items, 1, s.Dump())
			pod := pods.Items[0]
			want := tc.image
			if want == "" {
				want = runnerjob.DefaultImage
			}
			assert.Equal(t, want, pod.Spec.Containers[0].Image)
			// The daemon says its release when it declares itself to
			// Gitea, in both releases' words; the scaler registered it.
			log := b.PodLog(s.NS, pod.Name, runnerjob.ContainerName)
			assert.Contains(t, log, "with version: v"+tc.release+",",
				"the runner that took the job is the release the image's tag names")
			// A daemon that finds other labels in its .runner than it
			// would write rewrites the file, which is read-only in a real
			// pod, and exits: the scaler writes them as each release does.
			assert.NotContains(t, log, "labels updated to", "the daemon kept the .runner the scaler wrote")
		})
	}
}
