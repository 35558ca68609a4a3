// Package cfn reads the SAM/CloudFormation template that is the single source
// of truth for ddbpipe's resources: it parses the YAML short-form intrinsics
// (!Ref, !GetAtt, !Sub, ...) into their long JSON forms, merges SAM Globals
// into functions, checks references, and resolves values against a set of
// physical names (local or real).
package cfn

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrInvalid marks a template that does not hold together (unknown reference,
// bad intrinsic, missing property).
var ErrInvalid = errors.New("cfn: invalid template")

// Template is a parsed template. Values are plain Go values (map[string]any,
// []any, string, int, float64, bool) with intrinsics in long form:
// {"Ref": "X"}, {"Fn::GetAtt": ["A", "B"]}, {"Fn::Sub": "..."}.
type Template struct {
	// Metadata is the template's top-level Metadata section.
	Metadata   map[string]any
	Parameters map[string]Parameter
	Conditions map[string]any
	Globals    map[string]any
	Resources  map[string]Resource
	Outputs    map[string]Output
}

// Parameter is one template parameter.
type Parameter struct {
	Type          string
	Default       any
	AllowedValues []any
	// AllowedPattern is a String parameter's pattern, which CloudFormation
	// matches against the whole value.
	AllowedPattern string
	MinValue       *float64
	MaxValue       *float64
	Description    string
}

// Resource is one resource with its raw properties.
type Resource struct {
	LogicalID  string
	Type       string
	Properties map[string]any
	Metadata   map[string]any
	DependsOn  []string
	Condition  string
}

// Output is one template output.
type Output struct {
	Name        string
	Value       any
	Description string
	Condition   string // the output exists only when this condition holds ("": always)
}

// ParseFile reads and parses a template file.
func ParseFile(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cfn: read template: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse parses template YAML (or JSON, which is YAML).
func Parse(b []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("cfn: parse yaml: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: empty document", ErrInvalid)
	}
	root, err := convert(doc.Content[0])
	if err != nil {
		return nil, err
	}
	top, ok := root.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: top level is not a mapping", ErrInvalid)
	}
	t := &Template{
		Metadata:   mapOf(top["Metadata"]),
		Parameters: map[string]Parameter{},
		Conditions: mapOf(top["Conditions"]),
		Globals:    mapOf(top["Globals"]),
		Resources:  map[string]Resource{},
		Outputs:    map[string]Output{},
	}
	for name, raw := range mapOf(top["Parameters"]) {
		m := mapOf(raw)
		p := Parameter{Type: str(m["Type"]), Default: m["Default"], Description: str(m["Description"])}
		if av, ok := m["AllowedValues"].([]any); ok {
			p.AllowedValues = av
		}
		p.AllowedPattern = str(m["AllowedPattern"])
		if v, ok := number(m["MinValue"]); ok {
			p.MinValue = &v
		}
		if v, ok := number(m["MaxValue"]); ok {
			p.MaxValue = &v
		}
		t.Parameters[name] = p
	}
	resources := mapOf(top["Resources"])
	if len(resources) == 0 {
		return nil, fmt.Errorf("%w: no Resources", ErrInvalid)
	}
	for id, raw := range resources {
		m := mapOf(raw)
		r := Resource{
			LogicalID:  id,
			Type:       str(m["Type"]),
			Properties: mapOf(m["Properties"]),
			Metadata:   mapOf(m["Metadata"]),
			Condition:  str(m["Condition"]),
		}
		if r.Type == "" {
			return nil, fmt.Errorf("%w: resource %s has no Type", ErrInvalid, id)
		}
		switch d := m["DependsOn"].(type) {
		case string:
			r.DependsOn = []string{d}
		case []any:
			for _, x := range d {
				r.DependsOn = append(r.DependsOn, str(x))
			}
		}
		t.Resources[id] = r
	}
	for name, raw := range mapOf(top["Outputs"]) {
		m := mapOf(raw)
		t.Outputs[name] = Output{Name: name, Value: m["Value"], Description: str(m["Description"]), Condition: str(m["Condition"])}
	}
	return t, nil
}

// ResourceIDs returns the logical ids of resources of the given type
// (all resources when typ is empty), sorted.
func (t *Template) ResourceIDs(typ string) []string {
	var ids []string
	for id, r := range t.Resources {
		if typ == "" || r.Type == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// intrinsicTags maps YAML short forms to their long names.
var intrinsicTags = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition",
	"!GetAtt": "Fn::GetAtt", "!Sub": "Fn::Sub", "!Join": "Fn::Join", "!Select": "Fn::Select",
	"!Split": "Fn::Split", "!If": "Fn::If", "!Equals": "Fn::Equals", "!Not": "Fn::Not",
	"!And": "Fn::And", "!Or": "Fn::Or", "!FindInMap": "Fn::FindInMap", "!Base64": "Fn::Base64",
	"!GetAZs": "Fn::GetAZs", "!ImportValue": "Fn::ImportValue", "!Cidr": "Fn::Cidr",
	"!ToJsonString": "Fn::ToJsonString", "!Length": "Fn::Length",
}

func convert(n *yaml.Node) (any, error) {
	if n.Kind == yaml.AliasNode {
		return convert(n.Alias)
	}
	if long, ok := intrinsicTags[n.Tag]; ok {
		inner := *n
		inner.Tag = ""
		v, err := convert(&inner)
		if err != nil {
			return nil, err
		}
		if long == "Fn::GetAtt" {
			if s, ok := v.(string); ok {
				res, attr, found := strings.Cut(s, ".")
				if !found {
					return nil, fmt.Errorf("%w: line %d: !GetAtt %q needs Resource.Attribute", ErrInvalid, n.Line, s)
				}
				v = []any{res, attr}
			}
		}
		return map[string]any{long: v}, nil
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return nil, fmt.Errorf("%w: line %d: unknown tag %s", ErrInvalid, n.Line, n.Tag)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return convert(n.Content[0])
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("%w: line %d: duplicate key %q", ErrInvalid, n.Content[i].Line, k)
			}
			v, err := convert(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := convert(c)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, n.Line, err)
		}
		return v, nil
	}
}

func mapOf(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
