package main

import (
	"fmt"
	"net/url"
	"strings"
)

// parseOrigins reads --allowed-origins: a comma-separated list of browser
// origins (scheme://host[:port]) or "*".
func parseOrigins(s string) ([]string, error) {
	out := splitList(s)
	for i, o := range out {
		if o != "*" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return nil, fmt.Errorf("--allowed-origins: %q is not an origin such as https://app.example or http://localhost:3000", o)
			}
			out[i] = u.Scheme + "://" + u.Host
		}
	}
	return out, nil
}

// parseMediaDomains reads --allowed-media-domains: a comma-separated list
// of bare host names or IP addresses (no scheme, port, path or wildcard),
// as image URLs' hosts are compared with them.
func parseMediaDomains(s string) ([]string, error) {
	out := splitList(s)
	for _, d := range out {
		u, err := url.Parse("http://" + d)
		if err != nil || u.Host != d || u.Hostname() != d || u.User != nil || strings.ContainsAny(d, "*[]") {
			return nil, fmt.Errorf("--allowed-media-domains: %q is not a bare host such as images.example or 127.0.0.1", d)
		}
	}
	return out, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
