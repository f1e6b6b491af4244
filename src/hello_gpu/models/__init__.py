"""models: placeholder"""
