package runnerconfig

import (
	"bytes"
	"encoding/json"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// strictJSON decodes v, by way of JSON, into out, refusing keys that out's
// type does not have.
func strictJSON(v any, out *v1alpha1.RunnerConfig) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}
