package votessqs

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// schemaNode is the part of JSON Schema that schemas/vote.schema.json uses.
type schemaNode struct {
	Schema               string                 `json:"$schema"`
	Ref                  string                 `json:"$ref"`
	Type                 string                 `json:"type"`
	Required             []string               `json:"required"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties *bool                  `json:"additionalProperties"`
	Defs                 map[string]*schemaNode `json:"$defs"`
	MinLength            *int                   `json:"minLength"`
	MaxLength            *int                   `json:"maxLength"`
	Pattern              string                 `json:"pattern"`
	Format               string                 `json:"format"`
	Examples             []json.RawMessage      `json:"examples"`
}

func loadVoteSchema(t *testing.T) *schemaNode {
	t.Helper()
	b, err := os.ReadFile("../../../schemas/vote.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s schemaNode
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("vote.schema.json: %v", err)
	}
	return &s
}

// property returns a property's schema with its $ref resolved.
func (s *schemaNode) property(t *testing.T, name string) *schemaNode {
	t.Helper()
	p := s.Properties[name]
	if p == nil {
		t.Fatalf("schema has no property %s", name)
	}
	if p.Ref == "" {
		return p
	}
	def, ok := strings.CutPrefix(p.Ref, "#/$defs/")
	if !ok || s.Defs[def] == nil {
		t.Fatalf("property %s: cannot resolve $ref %q", name, p.Ref)
	}
	return s.Defs[def]
}

// valid evaluates the schema's keywords on body, with format date-time
// asserted by the castAt pattern.
func (s *schemaNode) valid(t *testing.T, body string) bool {
	var doc any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		return false
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	for _, name := range s.Required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	for name, value := range obj {
		if s.Properties[name] == nil {
			continue // additionalProperties: true
		}
		p := s.property(t, name)
		str, ok := value.(string)
		if p.Type == "string" && !ok {
			return false
		}
		n := utf8.RuneCountInString(str) // JSON Schema lengths count characters
		if p.MinLength != nil && n < *p.MinLength || p.MaxLength != nil && n > *p.MaxLength {
			return false
		}
		if p.Pattern != "" && !regexp.MustCompile(p.Pattern).MatchString(str) {
			return false
		}
	}
	return true
}

func TestVoteSchemaKeywords(t *testing.T) {
	s := loadVoteSchema(t)
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.Type != "object" {
		t.Errorf("$schema %q type %q, want draft 2020-12 and object", s.Schema, s.Type)
	}
	ids := []string{"voteId", "pollId", "optionId", "voterId"}
	want := append(slices.Clone(ids), "castAt")
	if got := slices.Sorted(slices.Values(s.Required)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("required = %v, want %v", s.Required, want)
	}
	if s.AdditionalProperties == nil || !*s.AdditionalProperties {
		t.Error("additionalProperties must be true: unknown fields are ignored")
	}
	for _, name := range ids {
		p := s.property(t, name)
		if p.Type != "string" || p.MinLength == nil || *p.MinLength != 1 || p.MaxLength == nil || *p.MaxLength != votes.MaxIDLength {
			t.Errorf("%s: type %q minLength %v maxLength %v, want string 1..%d", name, p.Type, p.MinLength, p.MaxLength, votes.MaxIDLength)
		}
		if _, err := regexp.Compile(p.Pattern); err != nil || p.Pattern == "" {
			t.Errorf("%s: pattern %q: %v", name, p.Pattern, err)
		}
	}
	if c := s.property(t, "castAt"); c.Type != "string" || c.Format != "date-time" {
		t.Errorf("castAt: type %q format %q, want string date-time", c.Type, c.Format)
	}
	if len(s.Examples) == 0 {
		t.Error("schema has no example")
	}
	for _, ex := range s.Examples {
		if _, err := votes.Parse(ex, time.Now()); err != nil || !s.valid(t, string(ex)) {
			t.Errorf("example %s: Parse %v, schema valid %t", ex, err, s.valid(t, string(ex)))
		}
	}
}

// The schema and votes.Parse agree on every example, except where the
// schema cannot say what Parse checks (marked).
func TestVoteSchemaAgreesWithParse(t *testing.T) {
	s := loadVoteSchema(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const cast = `"castAt":"2026-03-01T11:00:00Z"`
	body := func(fields string) string { return "{" + fields + "}" }
	full := func(id string) string {
		return body(`"voteId":` + id + `,"pollId":"p","optionId":"o","voterId":"u",` + cast)
	}
	tests := []struct {
		name string
		body string
		// schemaOnly: the schema accepts what Parse rejects, for a rule JSON
		// Schema cannot state; parseOnly the other way round.
		schemaOnly, parseOnly bool
	}{
		{name: "valid", body: full(`"v1"`)},
		{name: "unknown field ignored", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u",` + cast + `,"extra":1`)},
		{name: "offset and fraction", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u","castAt":"2026-03-01T13:00:00.123+02:00"`)},
		{name: "missing voteId", body: body(`"pollId":"p","optionId":"o","voterId":"u",` + cast)},
		{name: "missing pollId", body: body(`"voteId":"v","optionId":"o","voterId":"u",` + cast)},
		{name: "missing optionId", body: body(`"voteId":"v","pollId":"p","voterId":"u",` + cast)},
		{name: "missing voterId", body: body(`"voteId":"v","pollId":"p","optionId":"o",` + cast)},
		{name: "missing castAt", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u"`)},
		{name: "null id", body: full(`null`)},
		{name: "number id", body: full(`7`)},
		{name: "empty id", body: full(`""`)},
		{name: "128 bytes", body: full(`"` + strings.Repeat("x", 128) + `"`)},
		{name: "129 bytes", body: full(`"` + strings.Repeat("x", 129) + `"`)},
		{name: "hash", body: full(`"a#b"`)},
		{name: "control character", body: full(`"a\u0001"`)},
		{name: "tab", body: full(`"a\tb"`)},
		{name: "DEL", body: full(`"a\u007f"`)},
		{name: "unicode", body: full(`"vöte-🗳"`)},
		{name: "castAt not a time", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u","castAt":"yesterday"`)},
		{name: "castAt without zone", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u","castAt":"2026-03-01T11:00:00"`)},
		{name: "not an object", body: `["v"]`},
		// maxLength counts characters, votes.Parse bytes: 128 'é' are 256 bytes.
		{name: "128 two-byte characters", body: full(`"` + strings.Repeat("é", 128) + `"`), schemaOnly: true},
		// No JSON Schema keyword checks calendars or clocks.
		{name: "castAt 30 February", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u","castAt":"2026-02-30T11:00:00Z"`), schemaOnly: true},
		{name: "castAt in the future", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u","castAt":"2026-03-01T14:00:00Z"`), schemaOnly: true},
		// Go's time.Parse takes a comma before the fraction; RFC 3339 does not.
		{name: "castAt comma fraction", body: body(`"voteId":"v","pollId":"p","optionId":"o","voterId":"u","castAt":"2026-03-01T11:00:00,5Z"`), parseOnly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := votes.Parse([]byte(tt.body), now)
			parsed, schema := err == nil, s.valid(t, tt.body)
			switch {
			case tt.schemaOnly:
				if !schema || parsed {
					t.Errorf("schema valid %t, Parse error %v; want schema valid and Parse rejecting", schema, err)
				}
			case tt.parseOnly:
				if schema || !parsed {
					t.Errorf("schema valid %t, Parse error %v; want schema invalid and Parse accepting", schema, err)
				}
			case schema != parsed:
				t.Errorf("schema valid %t, Parse error %v; they disagree", schema, err)
			}
		})
	}
}
