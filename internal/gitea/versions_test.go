package gitea

import (
	"fmt"
	"os"
	"testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// fakeVersion is the release newFake answers as in this run of the tests.
var fakeVersion = giteatest.Gitea126

// TestMain runs the package's tests once per Gitea release the fake can
// answer as: the client must read 1.26 (what the bed runs and the
// recordings show) and 1.27 (read from its source) alike. Tests that hold
// for one release pin it with newFakeAs. A failure names its release in
// the test's log ("the fake answers as Gitea 1.27").
func TestMain(m *testing.M) {
	for _, v := range giteatest.Versions() {
		fakeVersion = v
		fmt.Printf("internal/gitea tests with the fake answering as Gitea %s\n", v)
		if code := m.Run(); code != 0 {
			os.Exit(code)
		}
	}
	os.Exit(0)
}
