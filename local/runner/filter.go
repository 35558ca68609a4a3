package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Lambda's limits on an event source mapping's FilterCriteria.
const (
	maxFilters       = 5
	maxPatternLength = 4096
)

// Filter is an event source mapping's FilterCriteria as Lambda applies it:
// a record is delivered when it matches any of the patterns, and dropped
// (counted as processed) otherwise. A pattern is matched against the
// record as the function would receive it (for a stream, its JSON in
// events.DynamoDBEventRecord's shape). The zero Filter delivers every record.
//
// Supported in a pattern, as in Lambda's event filtering: nested objects,
// arrays of values (any one matches; against an array in the record, any
// element), and the operators prefix, suffix, exists, anything-but,
// equals-ignore-case and numeric.
type Filter struct {
	patterns []map[string]any
}

// ParseFilter reads FilterCriteria's patterns (each a JSON object). It
// refuses what Lambda refuses at CreateEventSourceMapping: more than 5
// patterns, one over 4,096 characters, one that is not a JSON object, and
// a leaf that is not an array of values.
func ParseFilter(patterns []string) (Filter, error) {
	if len(patterns) > maxFilters {
		return Filter{}, fmt.Errorf("runner: %d filter patterns; an event source mapping takes at most %d", len(patterns), maxFilters)
	}
	var f Filter
	for i, s := range patterns {
		if len(s) > maxPatternLength {
			return Filter{}, fmt.Errorf("runner: filter pattern %d is %d characters long; at most %d", i+1, len(s), maxPatternLength)
		}
		var p map[string]any
		if err := json.Unmarshal([]byte(s), &p); err != nil || p == nil {
			return Filter{}, fmt.Errorf("runner: filter pattern %d is not a JSON object: %q", i+1, s)
		}
		if err := checkPattern(p, ""); err != nil {
			return Filter{}, fmt.Errorf("runner: filter pattern %d: %w", i+1, err)
		}
		f.patterns = append(f.patterns, p)
	}
	return f, nil
}

func checkPattern(p map[string]any, path string) error {
	if len(p) == 0 {
		return fmt.Errorf("%sempty object", at(path))
	}
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			if err := checkPattern(v, path+"."+k); err != nil {
				return err
			}
		case []any:
			if len(v) == 0 {
				return fmt.Errorf("%sempty array matches nothing", at(path+"."+k))
			}
			for _, m := range v {
				if op, ok := m.(map[string]any); ok {
					if err := checkOperator(op); err != nil {
						return fmt.Errorf("%s%w", at(path+"."+k), err)
					}
				}
			}
		default:
			return fmt.Errorf("%s%v must be an array of values", at(path+"."+k), v)
		}
	}
	return nil
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return strings.TrimPrefix(path, ".") + ": "
}

var errOperator = errors.New("an operator object has exactly one of prefix, suffix, exists, anything-but, equals-ignore-case, numeric")

func checkOperator(op map[string]any) error {
	if len(op) != 1 {
		return errOperator
	}
	for name, arg := range op {
		switch name {
		case "prefix", "suffix", "equals-ignore-case":
			if _, ok := arg.(string); !ok {
				return fmt.Errorf("%s takes a string, not %v", name, arg)
			}
		case "exists":
			if _, ok := arg.(bool); !ok {
				return fmt.Errorf("exists takes true or false, not %v", arg)
			}
		case "anything-but":
		case "numeric":
			cmp, ok := arg.([]any)
			if !ok || len(cmp) == 0 || len(cmp)%2 != 0 {
				return fmt.Errorf("numeric takes pairs of an operator and a number, not %v", arg)
			}
			for i := 0; i < len(cmp); i += 2 {
				if _, ok := cmp[i+1].(float64); !ok || !validComparison(cmp[i]) {
					return fmt.Errorf("numeric: %v %v is not a comparison", cmp[i], cmp[i+1])
				}
			}
		default:
			return errOperator
		}
	}
	return nil
}

func validComparison(op any) bool {
	switch op {
	case "=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

// Empty reports whether the filter delivers every record.
func (f Filter) Empty() bool { return len(f.patterns) == 0 }

// Reads reports whether a pattern looks at the field at path (or inside
// it): a record without that field matches as it would with it.
func (f Filter) Reads(path ...string) bool {
	for _, p := range f.patterns {
		at := p
		for i, k := range path {
			v, ok := at[k]
			if !ok {
				break
			}
			sub, nested := v.(map[string]any)
			if !nested || i == len(path)-1 {
				return true
			}
			at = sub
		}
	}
	return false
}

// Match reports whether a record (its JSON) passes the filter.
func (f Filter) Match(record []byte) (bool, error) {
	if f.Empty() {
		return true, nil
	}
	var ev map[string]any
	if err := json.Unmarshal(record, &ev); err != nil {
		return false, fmt.Errorf("runner: filter: record does not parse: %w", err)
	}
	for _, p := range f.patterns {
		if matchObject(p, ev) {
			return true, nil
		}
	}
	return false, nil
}

func matchObject(p, ev map[string]any) bool {
	for k, want := range p {
		got, present := ev[k]
		switch want := want.(type) {
		case map[string]any:
			sub, ok := got.(map[string]any)
			if !ok || !matchObject(want, sub) {
				return false
			}
		case []any:
			if !matchLeaf(want, got, present) {
				return false
			}
		}
	}
	return true
}

// matchLeaf reports whether any of the pattern's values matches the
// record's value (any of its elements, when it is an array).
func matchLeaf(want []any, got any, present bool) bool {
	values := []any{got}
	if arr, ok := got.([]any); ok {
		values = arr
	}
	for _, w := range want {
		if op, ok := w.(map[string]any); ok {
			if e, ok := op["exists"].(bool); ok {
				if e == present {
					return true
				}
				continue
			}
		}
		if !present {
			continue
		}
		for _, v := range values {
			if matchValue(w, v) {
				return true
			}
		}
	}
	return false
}

func matchValue(w, v any) bool {
	op, ok := w.(map[string]any)
	if !ok {
		return w == v // strings, float64 numbers, bools and null compare by value
	}
	for name, arg := range op {
		switch name {
		case "prefix":
			s, ok := v.(string)
			return ok && strings.HasPrefix(s, arg.(string))
		case "suffix":
			s, ok := v.(string)
			return ok && strings.HasSuffix(s, arg.(string))
		case "equals-ignore-case":
			s, ok := v.(string)
			return ok && strings.EqualFold(s, arg.(string))
		case "anything-but":
			if list, ok := arg.([]any); ok {
				for _, a := range list {
					if a == v {
						return false
					}
				}
				return true
			}
			return arg != v
		case "numeric":
			n, ok := v.(float64)
			if !ok {
				return false
			}
			cmp := arg.([]any)
			for i := 0; i < len(cmp); i += 2 {
				if !compare(n, cmp[i].(string), cmp[i+1].(float64)) {
					return false
				}
			}
			return true
		}
	}
	return false
}

func compare(n float64, op string, to float64) bool {
	switch op {
	case "=":
		return n == to
	case "<":
		return n < to
	case "<=":
		return n <= to
	case ">":
		return n > to
	default:
		return n >= to
	}
}
