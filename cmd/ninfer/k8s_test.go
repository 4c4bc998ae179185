package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// k8sObject is the part of a Kubernetes manifest the test reads.
type k8sObject struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		TargetPorts []struct{ Number int } `yaml:"targetPorts"`
		Template    struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Containers []struct {
					Name           string
					Args           []string
					ReadinessProbe struct {
						HTTPGet struct{ Path string } `yaml:"httpGet"`
					} `yaml:"readinessProbe"`
				}
			}
		}
	}
}

// readManifests decodes every document of deploy/k8s/NAME.
func readManifests(t *testing.T, name string) []k8sObject {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "k8s", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, o)
	}
}

func find(objs []k8sObject, kind, name string) *k8sObject {
	for i := range objs {
		if objs[i].Kind == kind && objs[i].Metadata.Name == name {
			return &objs[i]
		}
	}
	return nil
}

// The Kubernetes manifests are only on paper, but what they say about
// ninfer is checked here: the InferencePool selects the Deployment's pods
// on the port ninfer serves, the readiness probe is /ready, and every
// metric the endpoint picker is told to read is one a live `ninfer serve`
// exports with its model_name label.
func TestK8sManifestsMatchServe(t *testing.T) {
	gguf := sharedPath(t, "models", "stories260K.gguf")
	pods := readManifests(t, "ninfer.yaml")
	pool := readManifests(t, "inferencepool.yaml")
	dep, ip, epp := find(pods, "Deployment", "ninfer"), find(pool, "InferencePool", "ninfer"), find(pool, "Deployment", "ninfer-epp")
	if dep == nil || ip == nil || epp == nil {
		t.Fatalf("want Deployment ninfer, InferencePool ninfer and Deployment ninfer-epp; found %v %v %v", dep != nil, ip != nil, epp != nil)
	}
	for k, v := range ip.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("the InferencePool selects %s=%s, the ninfer pods are labelled %v", k, v, dep.Spec.Template.Metadata.Labels)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if len(ip.Spec.TargetPorts) != 1 || !slices.Contains(c.Args, "--port="+strconv.Itoa(ip.Spec.TargetPorts[0].Number)) {
		t.Errorf("the InferencePool targets %v, ninfer runs with %q", ip.Spec.TargetPorts, c.Args)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/ready" {
		t.Errorf("the readiness probe is %q, want /ready", c.ReadinessProbe.HTTPGet.Path)
	}
	var metrics []string
	for _, a := range epp.Spec.Template.Spec.Containers[0].Args {
		if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasSuffix(name, "-metric") && v != "" {
			metrics = append(metrics, v)
		}
	}
	if len(metrics) < 2 {
		t.Fatalf("the endpoint picker reads %q; want the queue and KV metrics", metrics)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- serve(ctx, []string{"--model", gguf, "--port", "0", "--threads", "1", "--model-id", "model", "--drain-grace", "0"}, &stdout, &stderr)
	}()
	defer func() { cancel(); <-exit }()
	waitFor(t, "the ready line", func() bool { return strings.HasPrefix(stdout.String(), serveReady) })
	url := strings.Fields(strings.TrimPrefix(stdout.String(), serveReady))[0]
	fams := scrapeMetrics(t, url)
	for _, name := range metrics {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			t.Errorf("the endpoint picker reads %s; ninfer's /metrics has no such metric", name)
			continue
		}
		labelled := false
		for _, l := range f.GetMetric()[0].GetLabel() {
			labelled = labelled || (l.GetName() == "model_name" && l.GetValue() == "model")
		}
		if !labelled {
			t.Errorf("%s has labels %v, want model_name=\"model\"", name, f.GetMetric()[0].GetLabel())
		}
	}
}

// scrapeMetrics fetches and parses base's /metrics.
func scrapeMetrics(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
