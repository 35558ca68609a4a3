package ddbstream

import (
	"fmt"
	"strconv"
	"strings"
)

// DynamoDB number limits: 38 significant digits, magnitudes from 1E-130 to
// 9.9999999999999999999999999999999999999E+125.
const (
	maxDigits   = 38
	minExponent = -130
	maxExponent = 125
)

// canonicalNumber checks that s is a number DynamoDB accepts and returns a
// canonical form in which numerically equal numbers are equal strings ("1.50",
// "15E-1" and "+1.5" all give "1.5E0"), for finding duplicates in number
// sets. The converters never rewrite numbers: they pass s on unchanged.
func canonicalNumber(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w %q: %s", ErrInvalidNumber, s, why)
	}
	rest := s
	sign := ""
	if rest != "" && (rest[0] == '+' || rest[0] == '-') {
		if rest[0] == '-' {
			sign = "-"
		}
		rest = rest[1:]
	}
	mantissa, expText, hasExp := strings.Cut(strings.ToUpper(rest), "E")
	intPart, fracPart, _ := strings.Cut(mantissa, ".")
	if !allDigits(intPart) || !allDigits(fracPart) || intPart+fracPart == "" {
		return bad("not a decimal number")
	}
	exp := 0
	if hasExp {
		digits := strings.TrimLeft(expText, "+-")
		if digits == "" || !allDigits(digits) || len(expText)-len(digits) > 1 {
			return bad("bad exponent")
		}
		if len(digits) > 6 {
			return bad("exponent out of range")
		}
		exp, _ = strconv.Atoi(expText)
	}
	digits := intPart + fracPart
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	if lead == len(digits) {
		return "0", nil // zero, whatever its sign or exponent
	}
	sig := strings.TrimRight(digits[lead:], "0")
	if len(sig) > maxDigits {
		return bad(fmt.Sprintf("more than %d significant digits", maxDigits))
	}
	// The first significant digit's power of ten.
	adjusted := exp + len(intPart) - lead - 1
	if adjusted < minExponent || adjusted > maxExponent {
		return bad("magnitude out of range 1E-130 to 9.99…E+125")
	}
	return fmt.Sprintf("%s%s.%sE%d", sign, sig[:1], sig[1:], adjusted), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
