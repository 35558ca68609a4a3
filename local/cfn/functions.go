package cfn

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Resource types the project uses.
const (
	TypeFunction = "AWS::Serverless::Function"
	TypeHttpApi  = "AWS::Serverless::HttpApi"
	TypeTable    = "AWS::DynamoDB::Table"
	TypeQueue    = "AWS::SQS::Queue"
	TypeBucket   = "AWS::S3::Bucket"
)

// Function is a SAM function with Globals.Function merged in.
type Function struct {
	LogicalID  string
	Properties map[string]any
	Metadata   map[string]any
	Events     []Event
}

// Event is one SAM event source of a function.
type Event struct {
	Name       string
	Type       string // SQS, DynamoDB, Schedule, HttpApi, S3, ...
	Properties map[string]any
}

// Dir is the folder that holds the function's main package: functions/<name>,
// where <name> is the logical id without "Function", in kebab case
// (ObjectsApiFunction → functions/objects-api). The Makefile's build-% rule
// uses the same mapping.
func (f Function) Dir() string { return "functions/" + FunctionName(f.LogicalID) }

// FunctionName maps a logical id to the function's folder name.
func FunctionName(logicalID string) string { return KebabName(logicalID, "Function") }

// KebabName is a logical id without its kind's suffix, in kebab case
// (CounterFunction, "Function" → "counter"; ApiReadPolicy, "Policy" →
// "api-read").
func KebabName(logicalID, suffix string) string {
	base := strings.TrimSuffix(logicalID, suffix)
	var b strings.Builder
	for i, r := range base {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Timeout is the function's timeout in seconds (SAM's default is 3).
func (f Function) Timeout() int { return intProp(f.Properties["Timeout"], 3) }

// MemorySize is the function's memory in MB (SAM's default is 128).
func (f Function) MemorySize() int { return intProp(f.Properties["MemorySize"], 128) }

// Environment returns the raw (unresolved) environment variables.
func (f Function) Environment() map[string]any {
	return mapOf(mapOf(f.Properties["Environment"])["Variables"])
}

func intProp(v any, def int) int {
	switch x := v.(type) {
	case int:
		return x
	case float64:
		return int(x)
	case string:
		if n, err := strconv.Atoi(x); err == nil {
			return n
		}
	}
	return def
}

// Functions returns the template's SAM functions, sorted by logical id.
func (t *Template) Functions() []Function {
	globals := mapOf(t.Globals["Function"])
	var out []Function
	for _, id := range t.ResourceIDs(TypeFunction) {
		r := t.Resources[id]
		props := mergeGlobals(globals, r.Properties).(map[string]any)
		f := Function{LogicalID: id, Properties: props, Metadata: r.Metadata}
		events := mapOf(props["Events"])
		names := make([]string, 0, len(events))
		for n := range events {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			e := mapOf(events[n])
			f.Events = append(f.Events, Event{Name: n, Type: str(e["Type"]), Properties: mapOf(e["Properties"])})
		}
		out = append(out, f)
	}
	return out
}

// Function returns one function by logical id.
func (t *Template) Function(id string) (Function, error) {
	for _, f := range t.Functions() {
		if f.LogicalID == id {
			return f, nil
		}
	}
	return Function{}, fmt.Errorf("%w: no function %q", ErrInvalid, id)
}

// mergeGlobals follows SAM's rules: maps merge (resource wins), lists
// concatenate (globals first), scalars are overridden by the resource.
func mergeGlobals(global, local any) any {
	if local == nil {
		return global
	}
	gm, gok := global.(map[string]any)
	lm, lok := local.(map[string]any)
	if gok && lok {
		if _, _, isFn := intrinsic(lm); isFn {
			return lm
		}
		out := make(map[string]any, len(gm)+len(lm))
		for k, v := range gm {
			out[k] = v
		}
		for k, v := range lm {
			out[k] = mergeGlobals(gm[k], v)
		}
		return out
	}
	gl, gok := global.([]any)
	ll, lok := local.([]any)
	if gok && lok {
		return append(append([]any{}, gl...), ll...)
	}
	return local
}
