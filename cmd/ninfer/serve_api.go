package main

import (
	"fmt"
	"net/url"
	"strings"
)

// parseOrigins reads --allowed-origins: a comma-separated list of browser
// origins (scheme://host[:port]) or "*".
func parseOrigins(s string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o != "*" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return nil, fmt.Errorf("--allowed-origins: %q is not an origin such as https://app.example or http://localhost:3000", o)
			}
			o = u.Scheme + "://" + u.Host
		}
		out = append(out, o)
	}
	return out, nil
}
