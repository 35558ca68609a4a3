package searchproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
)

// ZincSearch ignores a mapping's "dynamic": "strict" and maps any new
// field as text. With StrictMapping on, the proxy remembers the fields of
// an index created strict and fails a document that brings another, as
// OpenSearch does (strict_dynamic_mapping_exception), before the engine
// sees it. A PUT /{index}/_mapping adding fields later is not followed.

// strictFieldsOf reads an index's creation body: the paths of its mapped
// fields (an object's fields as "parent.child") when it is strict, nil
// otherwise.
func strictFieldsOf(body []byte) []string {
	var req struct {
		Mappings struct {
			Dynamic    any                        `json:"dynamic"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"mappings"`
	}
	if json.Unmarshal(body, &req) != nil || req.Mappings.Dynamic != "strict" && req.Mappings.Dynamic != "strict_allow_templates" {
		return nil
	}
	var fields []string
	var walk func(prefix string, props map[string]json.RawMessage)
	walk = func(prefix string, props map[string]json.RawMessage) {
		for name, raw := range props {
			fields = append(fields, prefix+name)
			var sub struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if json.Unmarshal(raw, &sub) == nil && sub.Properties != nil {
				walk(prefix+name+".", sub.Properties)
			}
		}
	}
	walk("", req.Mappings.Properties)
	slices.Sort(fields)
	return append(fields, "") // an empty strict mapping still names the index
}

// checkStrict fails a document bringing a field its strict index does not
// map.
func checkStrict(fields map[string]bool, source []byte, index string) *apiError {
	var doc map[string]json.RawMessage
	if json.Unmarshal(source, &doc) != nil {
		return nil // judged elsewhere
	}
	var walk func(prefix, within string, doc map[string]json.RawMessage) *apiError
	walk = func(prefix, within string, doc map[string]json.RawMessage) *apiError {
		for name, raw := range doc {
			path := prefix + name
			if !fields[path] {
				e := errorf(http.StatusBadRequest, "strict_dynamic_mapping_exception",
					"mapping set to strict, dynamic introduction of [%s] within [%s] is not allowed", name, within)
				e.Index = index
				return e
			}
			if raw = bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '{' && hasChildren(fields, path) {
				var sub map[string]json.RawMessage
				if json.Unmarshal(raw, &sub) == nil {
					if e := walk(path+".", path, sub); e != nil {
						return e
					}
				}
			}
		}
		return nil
	}
	return walk("", "_doc", doc)
}

func hasChildren(fields map[string]bool, path string) bool {
	for f := range fields {
		if len(f) > len(path) && f[:len(path)+1] == path+"." {
			return true
		}
	}
	return false
}
