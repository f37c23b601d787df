"""Adapters for the alert scanner's ``EmailSender`` port: SMTP and Amazon SES."""
