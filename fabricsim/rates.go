package fabricsim

import "github.com/accelnet/accelnet/pathcalc"

// maxMinFair gives delivered flows their max-min fair rates over the
// resources (directional links, NICs) their traces name, with pathcalc's
// shared implementation.
func maxMinFair(flows []*flowState, capacity func(string) float64) {
	index := map[string]int{}
	var caps []float64
	demand := make([]float64, len(flows))
	uses := make([][]int, len(flows))
	for i, fl := range flows {
		if !fl.Delivered {
			continue
		}
		demand[i] = fl.Spec.DemandGbps
		for _, name := range fl.resources {
			r, ok := index[name]
			if !ok {
				r = len(caps)
				index[name] = r
				caps = append(caps, capacity(name))
			}
			uses[i] = append(uses[i], r)
		}
	}
	for i, r := range pathcalc.MaxMinFair(caps, demand, uses) {
		flows[i].RateGbps = r
	}
}
