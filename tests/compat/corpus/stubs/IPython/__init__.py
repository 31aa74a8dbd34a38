"""Stand-in for IPython (d2l imports IPython.display for notebook plots)."""
