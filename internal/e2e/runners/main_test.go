//go:build e2e

package runners

import (
	"testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
)

func TestMain(m *testing.M) { e2e.Run(m) }
