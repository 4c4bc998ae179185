//go:build cuda

package main

// The CUDA backend ("--backend cuda") exists only in binaries built with
// -tags cuda: loading gorgonia.org/cu initialises the driver.
import _ "github.com/ninfer/ninfer-go/cuda"
