package httpapi

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// JWTAuthorizer validates bearer tokens as an HTTP API JWT authorizer does:
// an RS256 JWT whose signature checks against a key of the issuer's JWKS
// (found by kid), whose iss is Issuer, whose aud (or client_id) is one of
// Audience, and which has not expired (exp) and is already valid (nbf).
type JWTAuthorizer struct {
	Issuer   string
	Audience []string
	// JWKSURL is where the keys are; "" reads jwks_uri from
	// Issuer/.well-known/openid-configuration, as API Gateway does.
	JWKSURL string
	// Client fetches the JWKS (nil: a client with a 10 s timeout).
	Client *http.Client
}

// WithJWTAuthorizer adds a JWT authorizer that routes name as their
// Authorizer.
func WithJWTAuthorizer(name string, a JWTAuthorizer) Option {
	return func(c *config) {
		if c.jwt == nil {
			c.jwt = map[string]*jwtVerifier{}
		}
		hc := a.Client
		if hc == nil {
			hc = &http.Client{Timeout: 10 * time.Second}
		}
		c.jwt[name] = &jwtVerifier{cfg: a, hc: hc}
	}
}

// A refused token gets 401 {"message":"Unauthorized"} and a WWW-Authenticate
// header saying why, as API Gateway answers.
func unauthorized(description string) error {
	return &authError{status: http.StatusUnauthorized, message: "Unauthorized", reason: description}
}

type jwtVerifier struct {
	cfg JWTAuthorizer
	hc  *http.Client

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time
}

// jwksRefresh is how often an unknown kid may make the keys be fetched again.
const jwksRefresh = 10 * time.Second

func (v *jwtVerifier) verify(ctx context.Context, header string, now time.Time) (map[string]string, []string, error) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		token = header // API Gateway takes the bare token too
	}
	if token == "" {
		return nil, nil, unauthorized("no token")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, nil, unauthorized("the token is not a JWT")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return nil, nil, unauthorized("bad token header")
	}
	if hdr.Alg != "RS256" {
		return nil, nil, unauthorized("unsupported alg " + hdr.Alg)
	}
	key, err := v.key(ctx, hdr.Kid)
	if err != nil {
		return nil, nil, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, nil, unauthorized("bad signature encoding")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return nil, nil, unauthorized("signature is invalid")
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return nil, nil, unauthorized("bad claims")
	}
	if iss, _ := claims["iss"].(string); iss != v.cfg.Issuer {
		return nil, nil, unauthorized("the token has an invalid issuer")
	}
	if !v.audienceOK(claims) {
		return nil, nil, unauthorized("the token does not have a valid audience")
	}
	exp, ok := claims["exp"].(float64)
	if !ok || now.Unix() >= int64(exp) {
		return nil, nil, unauthorized("the token has expired")
	}
	if nbf, ok := claims["nbf"].(float64); ok && now.Unix() < int64(nbf) {
		return nil, nil, unauthorized("the token is not valid yet")
	}
	out := make(map[string]string, len(claims))
	for k, c := range claims {
		switch c := c.(type) {
		case string:
			out[k] = c
		default:
			b, _ := json.Marshal(c)
			out[k] = string(b)
		}
	}
	var scopes []string
	if sc, ok := claims["scope"].(string); ok && sc != "" {
		scopes = strings.Fields(sc)
	}
	return out, scopes, nil
}

func (v *jwtVerifier) audienceOK(claims map[string]any) bool {
	var auds []string
	switch a := claims["aud"].(type) {
	case string:
		auds = []string{a}
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok {
				auds = append(auds, s)
			}
		}
	}
	if cid, ok := claims["client_id"].(string); ok {
		auds = append(auds, cid)
	}
	for _, a := range auds {
		if slices.Contains(v.cfg.Audience, a) {
			return true
		}
	}
	return false
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// key returns the JWKS key kid, fetching the keys when it is unknown (at
// most once per jwksRefresh).
func (v *jwtVerifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if !v.fetched.IsZero() && time.Since(v.fetched) < jwksRefresh {
		return nil, unauthorized("no key with kid " + kid)
	}
	keys, err := v.fetch(ctx)
	v.fetched = time.Now()
	if err != nil {
		return nil, fmt.Errorf("%w: JWKS: %w", errFunction, err) // 500, as an unreachable issuer gives in AWS
	}
	v.keys = keys
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, unauthorized("no key with kid " + kid)
}

func (v *jwtVerifier) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	url := v.cfg.JWKSURL
	if url == "" {
		var doc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := v.getJSON(ctx, strings.TrimRight(v.cfg.Issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
			return nil, err
		}
		if doc.JWKSURI == "" {
			return nil, fmt.Errorf("openid-configuration of %s has no jwks_uri", v.cfg.Issuer)
		}
		url = doc.JWKSURI
	}
	var set struct {
		Keys []struct {
			Kty, Kid, N, E, Use string
		} `json:"keys"`
	}
	if err := v.getJSON(ctx, url, &set); err != nil {
		return nil, err
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys, nil
}

func (v *jwtVerifier) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := v.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
