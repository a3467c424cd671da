package selector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    string // the selector's String(), as sent to the API server
		wantErr string
	}{
		{name: "empty selects everything", raw: "", want: ""},
		{name: "string form", raw: "team=infra,tier in (gpu)", want: "team=infra,tier in (gpu)"},
		{name: "string form with blanks", raw: " pool = gpu ", want: "pool=gpu"},
		{name: "JSON matchLabels", raw: `{"matchLabels":{"team":"infra","pool":"gpu"}}`, want: "pool=gpu,team=infra"},
		{
			name: "JSON matchLabels and matchExpressions",
			raw:  `{"matchLabels":{"team":"infra"},"matchExpressions":[{"key":"tier","operator":"In","values":["gpu"]}]}`,
			want: "team=infra,tier in (gpu)",
		},
		{
			name: "JSON with every operator",
			raw: `{"matchExpressions":[{"key":"a","operator":"NotIn","values":["x","y"]},` +
				`{"key":"b","operator":"Exists"},{"key":"c","operator":"DoesNotExist"}]}`,
			want: "a notin (x,y),b,!c",
		},
		{name: "JSON after blanks", raw: "  \n{\"matchLabels\":{\"a\":\"b\"}}  ", want: "a=b"},
		{name: "empty JSON object selects everything", raw: `{}`, want: ""},
		{name: "string syntax error", raw: "a in (", wantErr: "unable to parse requirement"},
		{name: "JSON syntax error", raw: `{"matchLabels":`, wantErr: "invalid JSON label selector"},
		{name: "misspelt JSON field", raw: `{"matchLabel":{"a":"b"}}`, wantErr: `unknown field "matchLabel"`},
		{name: "two JSON values", raw: `{"matchLabels":{"a":"b"}} {}`, wantErr: "more than one JSON value"},
		{name: "text after the JSON object", raw: `{"matchLabels":{"a":"b"}} x`, wantErr: "invalid JSON label selector"},
		{name: "In without values", raw: `{"matchExpressions":[{"key":"a","operator":"In"}]}`, wantErr: "invalid JSON label selector"},
		{name: "unknown operator", raw: `{"matchExpressions":[{"key":"a","operator":"Sometimes","values":["x"]}]}`, wantErr: "invalid JSON label selector"},
		{name: "invalid key", raw: `{"matchLabels":{"a b":"c"}}`, wantErr: "invalid JSON label selector"},
		{name: "invalid value", raw: `{"matchLabels":{"a":"b,c"}}`, wantErr: "invalid JSON label selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := Parse(tt.raw)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, sel.String())
		})
	}
}

func TestParseExclude(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    string
		wantErr error
	}{
		{name: "string form", raw: "pool=gpu", want: "pool=gpu"},
		{name: "JSON", raw: `{"matchLabels":{"pool":"gpu"}}`, want: "pool=gpu"},
		{name: "blank", raw: " ", wantErr: ErrExcludesEverything},
		{name: "empty JSON object", raw: `{}`, wantErr: ErrExcludesEverything},
		{name: "JSON with empty matchLabels", raw: `{"matchLabels":{}}`, wantErr: ErrExcludesEverything},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := ParseExclude(tt.raw)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, sel.String())
		})
	}
	_, err := ParseExclude("a in (")
	assert.ErrorContains(t, err, "unable to parse requirement", "a syntax error is reported as such")
}

// The two forms of one selector pick the same RunnerGroups.
func TestBothFormsSelectTheSame(t *testing.T) {
	asJSON, err := Parse(`{"matchLabels":{"team":"infra"},"matchExpressions":[{"key":"tier","operator":"NotIn","values":["cpu"]}]}`)
	require.NoError(t, err)
	asString, err := Parse("team=infra,tier notin (cpu)")
	require.NoError(t, err)
	for _, set := range []labels.Set{
		{}, {"team": "infra"}, {"team": "infra", "tier": "gpu"}, {"team": "infra", "tier": "cpu"}, {"team": "web"},
	} {
		assert.Equal(t, asString.Matches(set), asJSON.Matches(set), "%v", set)
	}
}
