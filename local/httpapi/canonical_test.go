package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The canonical forms execute-api answers with in its refusals, as quoted
// in the issues canonical.go cites, and SigV4's own rules.
func TestCanonicalURI(t *testing.T) {
	tests := []struct {
		name, raw string
		normalize bool
		want      string
	}{
		{"plain", "/objects/a/b.txt", true, "/objects/a/b.txt"},
		{"empty", "", true, "/"},
		{"escapes encoded again", "/_search/%3Fa=b%20c", true, "/_search/%253Fa%3Db%2520c"},
		{"websocket connection id", "/dev/%40connections/ZDb-VclrIAMCJ3w%3D", true, "/dev/%2540connections/ZDb-VclrIAMCJ3w%253D"},
		{"raw reserved characters", "/$default/@connections/a(b)!*'", true, "/%24default/%40connections/a%28b%29%21%2A%27"},
		{"encoded slash stays encoded", "/objects/a%2Fb", true, "/objects/a%252Fb"},
		{"lower-case escape kept as sent", "/objects/a%2fb", true, "/objects/a%252fb"},
		{"raw UTF-8", "/objects/caf\u00e9", true, "/objects/caf%C3%A9"},
		{"plus is not a space", "/objects/a+b", true, "/objects/a%2Bb"},
		{"repeated slashes removed", "/objects//a///b/", true, "/objects/a/b/"},
		{"dot segments removed", "/objects/./a/../b", true, "/objects/b"},
		{"as sent", "/objects//a/./b/", false, "/objects//a/./b/"},
		{"only slashes", "//", true, "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canonicalURI(tt.raw, tt.normalize); got != tt.want {
				t.Errorf("canonicalURI(%q, %v) = %q, want %q", tt.raw, tt.normalize, got, tt.want)
			}
		})
	}
}

func TestCanonicalQuery(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"none", "", ""},
		{"issue 27: unencoded slash", "prefix=a%2F&delimiter=/", "delimiter=%2F&prefix=a%2F"},
		{"plus is a space", "%24filter=id+eq+123", "%24filter=id%20eq%20123"},
		{"encoded plus stays a plus", "q=a%2Bb", "q=a%2Bb"},
		{"no value", "versions", "versions="},
		{"empty value", "uploads=&a=1", "a=1&uploads="},
		{"repeated keys sorted by value", "b=2&a=2&a=1&a=10", "a=1&a=10&a=2&b=2"},
		{"sorted by encoded name", "a-b=1&a=2&A=3", "A=3&a=2&a-b=1"},
		{"empty pieces skipped", "a=1&&b=2&", "a=1&b=2"},
		{"reserved and UTF-8 encoded", "k=(a)!*'~&\u00e9=%C3%A9", "%C3%A9=%C3%A9&k=%28a%29%21%2A%27~"},
		{"lower-case escapes", "k=%2f%c3%a9", "k=%2F%C3%A9"},
		{"a stray percent stands for itself", "k=100%&j=%zz", "j=%25zz&k=100%25"},
		{"equals in a value", "k=a=b", "k=a%3Db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canonicalQuery(tt.raw); got != tt.want {
				t.Errorf("canonicalQuery(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

// AWS's SigV4 test suite, get-vanilla: the signing key chain and the string
// to sign.
func TestSignatureVector(t *testing.T) {
	canonical := "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	sts := stringToSign("20150830T123600Z", "20150830/us-east-1/service/aws4_request", canonical)
	got := signature("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "service", sts)
	if want := "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"; got != want {
		t.Errorf("signature = %s, want %s", got, want)
	}
}

// FuzzGoSignerAccepted: whatever path and query a Go client sends, a
// request the Go SDK's signer signed passes the check, and the same with a
// wrong secret does not. (A query url.ParseQuery rejects is left out: the
// signer drops its bad pairs from what it signs.)
func FuzzGoSignerAccepted(f *testing.F) {
	for _, seed := range [][2]string{
		{"/objects/a b/c", "prefix=a%2F&delimiter=/"},
		{"/objects//x/./y/../z/", "a=1&a=0&b"},
		{"/objects/%E2%98%83(!*')", "q=a+b&r=%7e&&"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, err := NewServer([]Route{{Path: "$default", Function: "any", Authorizer: AuthIAM}}, (&recorder{}).invoke,
		WithIAM(testIAM), WithClock(func() time.Time { return fixedTime }))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, query string) {
		if _, err := url.ParseQuery(query); err != nil {
			t.Skip()
		}
		u, err := url.Parse("http://api.local/objects/" + path)
		if err != nil {
			t.Skip()
		}
		u.RawQuery = query
		for _, secret := range []string{testIAM.SecretAccessKey, "wrong"} {
			r, err := http.NewRequest("GET", u.String(), nil)
			if err != nil {
				t.Skip()
			}
			creds := aws.Credentials{AccessKeyID: testIAM.AccessKeyID, SecretAccessKey: secret}
			const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
			if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, emptySHA256, "execute-api", testIAM.Region, fixedTime); err != nil {
				t.Fatal(err)
			}
			r.RequestURI = r.URL.RequestURI() // the target as net/http writes it
			w := serve(s, r)
			refused := w.Header().Get("X-Amzn-Errortype") == "InvalidSignatureException"
			if refused != (secret == "wrong") && w.Code != http.StatusBadRequest {
				t.Fatalf("GET %s signed with %q: %d %s", r.RequestURI, secret, w.Code, w.Body)
			}
		}
	})
}
