"""The planner from Python: tandem.plan, tandem.largest and tandem.machine_rates
(_plan.py), and the calibration that only Python can measure (_calibrate.py). The
package tandem exports them; importing this package imports none of its modules."""
