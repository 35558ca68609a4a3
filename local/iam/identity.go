package iam

import (
	"net/http"
	"regexp"
	"strings"
	"unicode"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// Admin is the identity of the local stack's own credentials (the CLI, the
// tests, provisioning): every call it makes is allowed, and recorded.
const Admin = "admin"

// Anonymous is the identity of an unsigned request.
const Anonymous = "anonymous"

// Identity is who signed a request: a function's execution role, one of
// the template's managed policies attached to a role of its own (producer,
// operator, analyst), or the admin.
type Identity struct {
	Name        string // "CounterFunction", "producer", "admin"
	AccessKeyID string
	Principal   string // the role's ARN
	// Role is the template's logical id of the role (functions) or of the
	// managed policy (the others); "" for the admin.
	Role string
}

// AccessKeyID is the access key id an identity signs with: the admin's
// key, "As" and the identity's name in letters and digits only, as
// DynamoDB Local wants them ("ddbpipeAsCounterFunction",
// "ddbpipeAsProducer"). Every identity signs with the admin's secret: the
// local servers check (S3) or ignore (DynamoDB Local, fauxqs) the admin's
// credentials only, and the S3 proxy hands a judged request on signed as
// the admin.
func AccessKeyID(adminKey, name string) string {
	var b strings.Builder
	b.WriteString(adminKey)
	b.WriteString("As")
	upper := true
	for _, r := range name {
		switch {
		case r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if upper {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
			upper = false
		default:
			upper = true
		}
	}
	return b.String()
}

// PolicyIdentityName names the identity of a managed policy of the
// template: its logical id without the "Policy" suffix, in kebab case
// (ProducerPolicy → "producer", ApiReadPolicy → "api-read").
func PolicyIdentityName(logicalID string) string { return cfn.KebabName(logicalID, "Policy") }

var credentialRE = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// SigningKey returns the access key id that signed r: from its
// Authorization header, or from the X-Amz-Credential of a presigned URL;
// "" for an unsigned request.
func SigningKey(r *http.Request) string {
	if m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
		key, _, _ := strings.Cut(c, "/")
		return key
	}
	return ""
}
