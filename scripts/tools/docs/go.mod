// Tools module for `make docs` and the docs checks: chartdoc writes the
// chart README's values table from values.yaml, apidoc writes the RunnerGroup
// API reference from internal/api/v1alpha1, mdlinks checks every Markdown
// link. Kept apart from the project's go.mod, which carries only the
// operator's own libraries.
module github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/docs

go 1.26

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5
)
