// Package jsonerr says what is wrong with a JSON document in its reader's
// words: the field, what it should hold and what it held, with no Go type
// names (encoding/json's own messages name the Go struct and its types).
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// Describe returns a message for an error from encoding/json's Unmarshal
// or Decoder.Decode, or err's own text when it is not one of json's.
func Describe(err error) string {
	var (
		typ    *json.UnmarshalTypeError
		syntax *json.SyntaxError
		parse  *time.ParseError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("want %s, got %s", kind(typ.Type), article(typ.Value))
		}
		return fmt.Sprintf("field %q: want %s, got %s", field, kind(typ.Type), article(typ.Value))
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.As(err, &parse):
		return fmt.Sprintf("%q is not an RFC 3339 time like 2026-12-01T00:00:00Z", parse.Value)
	case errors.Is(err, io.EOF):
		return "empty body: want a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too soon"
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + f
	}
	return strings.TrimPrefix(msg, "json: ")
}

// kind names what a Go type holds as JSON.
func kind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(kind(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return kind(t.Elem())
	}
	return "another value"
}

// article puts "a"/"an" before json's name of what it found ("string",
// "number 1.5", "array", "object", "bool").
func article(v string) string {
	switch {
	case v == "":
		return "another value"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number "):
		return v
	case strings.IndexByte("aeiou", v[0]) >= 0:
		return "an " + v
	}
	return "a " + v
}
