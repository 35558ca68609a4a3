package objects

import (
	"fmt"
	"slices"
	"strconv"
)

// Sort keys of version items: LatestSortKey holds the latest version (a
// copy); history version n is "v" and n zero-padded to ten digits, so that
// the table's string order is version order and begins_with(sk, "v")
// selects exactly the version items (chunks use "c").
const (
	LatestSortKey  = "v0"
	VersionPrefix  = "v"
	versionDigits  = 10
	MaxVersion     = 9_999_999_999 // the largest number ten digits hold
	historyKeySize = 1 + versionDigits
)

// SortKey returns the sort key of a version: "v0" for 0 (the latest copy),
// "v%010d" for history versions 1 to MaxVersion.
func SortKey(version int64) string {
	if version == 0 {
		return LatestSortKey
	}
	if version < 0 || version > MaxVersion {
		panic(fmt.Sprintf("objects: version %d out of range", version))
	}
	return fmt.Sprintf("v%010d", version)
}

// ParseSortKey returns the version a sort key names: 0 for "v0", n for the
// history key of n. Anything else (chunk keys, unpadded or signed numbers,
// "v0000000000") is an error.
func ParseSortKey(sk string) (int64, error) {
	if sk == LatestSortKey {
		return 0, nil
	}
	if len(sk) != historyKeySize || sk[0] != 'v' {
		return 0, fmt.Errorf("objects: %q is not a version sort key", sk)
	}
	for _, c := range sk[1:] {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("objects: %q is not a version sort key", sk)
		}
	}
	n, err := strconv.ParseInt(sk[1:], 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("objects: %q is not a version sort key", sk)
	}
	return n, nil
}

// ParseVersion reads a version as a client writes it (?version=7,
// If-Match: 7): a decimal number from 1 to MaxVersion.
func ParseVersion(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > MaxVersion {
		return 0, invalid(ReasonBadVersion, "version %q is not a number from 1 to %d", truncate(s, 32), int64(MaxVersion))
	}
	return n, nil
}

// Prune returns the history versions to delete so that at most maxVersions
// remain: the oldest ones, ascending. latest is never returned, nor any
// version above it (a newer write may be committing them); maxVersions
// below 1 counts as 1, so the latest version is always kept in history.
// The input may be unsorted and hold duplicates.
func Prune(history []int64, latest int64, maxVersions int) []int64 {
	maxVersions = max(maxVersions, 1)
	keep := slices.Clone(history)
	slices.Sort(keep)
	keep = slices.Compact(keep)
	var upTo []int64 // versions at or below latest
	for _, v := range keep {
		if v >= 1 && v <= latest {
			upTo = append(upTo, v)
		}
	}
	if len(upTo) <= maxVersions {
		return nil
	}
	return upTo[:len(upTo)-maxVersions]
}
