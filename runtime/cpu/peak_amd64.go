package cpu

// Peak-rate loops in peak_amd64.s (see Peak).

// peakVNNI runs n iterations of 16 independent ZMM VPDPBUSD (levelAVX512).
//
//go:noescape
func peakVNNI(n int)

// peakFMA512 runs n iterations of 16 independent ZMM VFMADD231PS
// (levelAVX512).
//
//go:noescape
func peakFMA512(n int)

// peakFMA256 runs n iterations of 12 independent YMM VFMADD231PS
// (levelAVX2).
//
//go:noescape
func peakFMA256(n int)

// peakMADDUBSW256 runs n iterations of 12 independent YMM VPMADDUBSW
// (levelAVX2).
//
//go:noescape
func peakMADDUBSW256(n int)
