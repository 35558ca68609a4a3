package archive

import (
	"fmt"
	"time"
)

// monthLayout is how months are written: YYYY-MM.
const monthLayout = "2006-01"

// MonthOf is the month (UTC) a time falls in.
func MonthOf(t time.Time) string { return t.UTC().Format(monthLayout) }

// MonthStart is the first instant of a month, in UTC.
func MonthStart(month string) (time.Time, error) {
	t, err := time.Parse(monthLayout, month)
	if err != nil {
		return time.Time{}, fmt.Errorf("rotation: month %q is not YYYY-MM: %w", month, err)
	}
	return t.UTC(), nil
}

// AddMonths moves a month by n months (n may be negative).
func AddMonths(month string, n int) (string, error) {
	t, err := MonthStart(month)
	if err != nil {
		return "", err
	}
	return t.AddDate(0, n, 0).Format(monthLayout), nil
}

// ColdAt is when a month turns cold: the end of the month plus the grace
// days, which leave late writes (a vote cast on the 30th, counted on the
// 1st) and the stream's delivery time to settle.
func ColdAt(month string, graceDays int) (time.Time, error) {
	t, err := MonthStart(month)
	if err != nil {
		return time.Time{}, err
	}
	return t.AddDate(0, 1, graceDays), nil
}

// TableName is a month's ledger table: <prefix>-YYYY-MM.
func TableName(prefix, month string) string { return prefix + "-" + month }
